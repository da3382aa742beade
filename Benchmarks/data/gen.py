#!/usr/bin/env python3
# Copied unchanged (apart from this note) from the project's shared/bench/gen.py: the data set and W1–W7
# checksums of shared/bench/WORKLOADS.md. Keep the two identical; Benchmarks/data/generate.sh runs this copy.
"""Deterministic music-library data set + workload definition for the peer benchmark.

    python3 gen.py --n 1000000 --seed 42 --out DIR

Writes into OUT (keep it out of the repo):
  docs.jsonl     N track documents, one JSON object per line, in doc order
  rows.tsv       the "by hierarchy" view rows in doc order: genre artist album title docid duration
  q2.tsv         W2: one start key per line (genre artist album title)
  q4.tsv         W4: one range per line: 4 start-key parts, then 4 end-key parts (both inclusive)
  u6.tsv         W6: doc index (0-based line number in rows.tsv) and new duration
  expected.json  reference checksums for every workload, computed here, independently of the peers
Row order is (key, docid) with keys compared element-wise by Unicode code point, which is
exactly the memcmp order of the byte encoding in common.h.
"""
import argparse, bisect, hashlib, itertools, json, os, random, re, time, zlib

GENRES = ["Rock", "Pop", "Hip-Hop", "Electronic", "Jazz", "Classical", "Country", "R&B", "Metal", "Indie",
          "Alternative", "Blues", "Folk", "Soul", "Reggae", "Punk", "Latin", "Soundtrack", "House", "Techno",
          "Funk", "Ambient", "Disco", "Gospel", "World", "Trance", "K-Pop", "J-Pop", "Ska", "Grunge",
          "Drum and Bass", "Dubstep", "Opera", "Swing", "Bluegrass", "Bossa Nova", "Chanson Française",
          "Música Popular Brasileira", "Trip-Hop", "Enka"]
ACCENTS = str.maketrans("aeioucnAEIOU", "áéíöüçñÁÉÍÖÜ")
CJK = "東京大阪音楽愛夜空星月光雨風花海山川心夢歌恋青春時間世界一人二君僕私한국사랑노래별바다하늘꿈ひかりさくらうたそらあいゆめアイドルロック"
FNV_PRIME, M64 = 0x100000001B3, (1 << 64) - 1
Q2, Q4, LIMIT = 100_000, 1000, 20


def word_list(rng):
    try:
        with open("/usr/share/dict/words", encoding="utf-8") as f:
            words = sorted({w.lower() for w in f.read().split() if re.fullmatch(r"[A-Za-z]{2,}", w)})
        src = "wamerican /usr/share/dict/words"
    except OSError:  # built-in syllable generator
        syl = [c + v for c in "bcdfghjklmnprstvwz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]
        words = sorted({"".join(rng.choice(syl) for _ in range(rng.randint(1, 3))) for _ in range(60000)})
        src = "built-in syllables"
    rng.shuffle(words)  # Zipf rank of a word is its position after the shuffle
    return [w.capitalize() for w in words], src


def zipf_cw(n, s, offset=0.0):
    return list(itertools.accumulate(1.0 / (r + offset) ** s for r in range(1, n + 1)))


def exotic(s, rng):  # the ~2% of names that are not ASCII
    if rng.random() < 0.5:
        t = s.translate(ACCENTS)
        return t if t != s else s + " ü"
    return "".join(rng.choice(CJK) for _ in range(rng.randint(2, 6)))


def names(rng, words, wcw, count, lengths, weights, p_exotic=0.02):
    ks = rng.choices(lengths, weights=weights, k=count)
    ws = iter(rng.choices(words, cum_weights=wcw, k=sum(ks)))
    out = [" ".join(itertools.islice(ws, k)) for k in ks]
    for i in range(count):
        if rng.random() < p_exotic:
            out[i] = exotic(out[i], rng)
    return out


def generate(n, seed, out):
    rng = random.Random(f"{seed}-data")
    words, src = word_list(rng)
    wcw = zipf_cw(len(words), 1.0, 10)
    n_art, n_alb = max(1, n // 50), max(1, n // 10)
    art_name = names(rng, words, wcw, n_art, (1, 2, 3), (40, 45, 15))
    art_name = [("The " + a if rng.random() < 0.15 else a) for a in art_name]
    art_genre = rng.choices(GENRES, cum_weights=zipf_cw(len(GENRES), 1.0), k=n_art)
    alb_name = names(rng, words, wcw, n_alb, (1, 2, 3, 4), (30, 35, 25, 10))
    alb_artist = rng.choices(range(n_art), cum_weights=zipf_cw(n_art, 0.7), k=n_alb)
    alb_year = [max(1950, 2024 - int(abs(rng.gauss(0, 18)))) for _ in range(n_alb)]
    titles = names(rng, words, wcw, n, (1, 2, 3, 4, 5), (20, 35, 25, 12, 8))
    albums = [rng.randrange(n_alb) for _ in range(n)]  # ~10 tracks per album
    durations = [min(600, max(60, int(rng.gauss(235, 75)))) for _ in range(n)]
    ratings = rng.choices(range(6), weights=(5, 8, 15, 30, 27, 15), k=n)

    rows, dumps = [], json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    with open(os.path.join(out, "docs.jsonl"), "w", encoding="utf-8") as dj, \
            open(os.path.join(out, "rows.tsv"), "w", encoding="utf-8") as rt:
        for i in range(n):
            al = albums[i]
            ar = alb_artist[al]
            doc = {"_id": "track-%08d" % i, "type": "track", "genre": art_genre[ar], "artist": art_name[ar],
                   "album": alb_name[al], "title": titles[i], "duration": durations[i], "year": alb_year[al],
                   "rating": ratings[i]}
            dj.write(dumps(doc) + "\n")
            row = (doc["genre"], doc["artist"], doc["album"], doc["title"], doc["_id"], durations[i])
            rt.write("%s\t%s\t%s\t%s\t%s\t%d\n" % row)
            rows.append(row)
    return rows, src


def h_rows(h, rs, val):  # W2/W7 checksum: FNV-style fold of (crc32(docid) << 16 ^ value) over rows in order
    for r in rs:
        h = ((h ^ ((zlib.crc32(r[4].encode()) << 16) ^ val(r))) * FNV_PRIME) & M64
    return h


def workloads(rows, seed, out):
    n, rng = len(rows), random.Random(f"{seed}-workload")
    srt = sorted(rows)
    keys = [r[:4] for r in srt]
    pre = list(itertools.accumulate((r[5] for r in srt), initial=0))
    exp = {}

    q2 = [rows[rng.randrange(n)][:4] for _ in range(Q2)]
    h = cnt = 0
    for q in q2:
        i = bisect.bisect_left(keys, q)
        cnt += min(LIMIT, n - i)
        h = h_rows(h, srt[i:i + LIMIT], lambda r: r[5])
    exp["W2"] = "rows=%d h=%016x" % (cnt, h)

    nbytes = 10 * n + sum(len(x.encode()) for r in rows for x in r[:5])  # enc(key) = 10 + utf8 bytes of parts
    exp["W3"] = "rows=%d sum=%d bytes=%d" % (n, pre[n], nbytes)

    span, q4, cnt, tot = max(1, n // 100), [], 0, 0
    for _ in range(Q4):
        s = rng.randrange(n - span + 1)
        lo, hi = keys[s], keys[s + span - 1]
        a, b = bisect.bisect_left(keys, lo), bisect.bisect_right(keys, hi)
        cnt, tot = cnt + b - a, tot + pre[b] - pre[a]
        q4.append(lo + hi)
    exp["W4"] = "rows=%d sum=%d" % (cnt, tot)
    exp["W5"] = "rows=%d" % n

    u6 = [(i, 60 + (rows[i][5] - 60 + rng.randint(1, 540)) % 541) for i in rng.sample(range(n), max(1, n // 100))]
    new = {rows[i][4]: v for i, v in u6}
    exp["W6"] = "rows=%d sum=%d" % (n, pre[n] + sum(v - rows[i][5] for i, v in u6))
    i = bisect.bisect_left(keys, q2[0])
    exp["W7"] = "rows=%d h=%016x" % (len(srt[i:i + LIMIT]), h_rows(0, srt[i:i + LIMIT], lambda r: new.get(r[4], r[5])))

    for name, lines in (("q2.tsv", q2), ("q4.tsv", q4), ("u6.tsv", u6)):
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            f.writelines("\t".join(map(str, t)) + "\n" for t in lines)
    return exp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    rows, src = generate(a.n, a.seed, a.out)
    t1 = time.time()
    assert all("\t" not in x and "\n" not in x and "\0" not in x for r in rows for x in r[:4])
    exp = workloads(rows, a.seed, a.out)
    with open(os.path.join(a.out, "rows.tsv"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    exp.update(n=a.n, seed=a.seed, words=src, rows_tsv_sha256=digest,
               distinct={k: len({r[:j + 1] for r in rows}) for j, k in enumerate(("genre", "artist", "album"))},
               non_ascii_rows=sum(1 for r in rows if not "".join(r[:4]).isascii()))
    with open(os.path.join(a.out, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1, ensure_ascii=False)
    print("gen: %d docs in %.1fs, workloads+checks in %.1fs -> %s" % (a.n, t1 - t0, time.time() - t1, a.out))


if __name__ == "__main__":
    main()
