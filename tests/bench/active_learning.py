#!/usr/bin/env python3
"""active_learning.py -- `make bench-active`: does asking attn_uncertain which rows to label beat
labelling rows at random?

Per corpus and seed, from a pool of the corpus's training rows (a fixed shuffle by seed), in a
table `pool(id, text, label)` whose label is NULL until a row is "labelled" (its true label
copied in, as a person would type it):

  uncertain  --start random rows labelled, then --rounds rounds: attn_fit on the whole pool
             (the unlabelled rows included, as NULL labels), then the --batch rows of
             `attn_uncertain(... WHERE label IS NULL) LIMIT batch` labelled; a last attn_fit
  random     the same number of labels (start + rounds x batch), all drawn at random, one
             attn_fit on the pool

--select per-label takes each round's rows in turns across the predicted labels (the least
sure of each label, then the next of each...: a window function over attn_uncertain), so that
a round does not spend its labels on one confusing kind of text. --select diverse takes them
from attn_uncertain(..., '{"diverse": batch}'): BADGE's order, uncertain and diverse.

--select mean-margin, per-label-mean-margin, bald (each text classified again with words
dropped at random: perturbed_select), power-rank, pair-turns and badge (gradient embeddings
from attn_probs and attn_embed, k-means++ seeding over them; badge-fc with fc1's activations
(the last layer's input) in place of the attention context, badge-fc-turns the same with each
pick in turns across the predicted labels; badge-greedy farthest-first;
badge-1000 and badge-2000 among the 1,000 or 2,000 least sure by margin only; needs numpy) and density (1 - margin times the
similarity to the nearest unlabelled texts; numpy), cal and cal-fc (contrastive active learning:
the mean KL divergence from the nearest labelled texts' predictions; numpy), typiclust and
typiclust-fc (the most typical text of the largest clusters without labels; numpy) and
badge-fc-linear (badge-fc on fc1's output as it is, which diverse's positive part beat) are
selections measured and not kept in attn_uncertain (tests/bench/RESULTS.md). badge-fc is the
Python prototype of diverse (its own draws). --select-options trains the models that choose
with other options than the last fit (e.g. '{"ensemble": 3}'); --first-seed runs other seeds.

Both are scored on the corpus's test split (weighted F1), or with --holdout on held-out training
rows (the pool the shuffle's first --pool less 2,000 rows, the next 2,000 scored): the split to
choose a selection on. The default: 100 random labels, 4 rounds of 100, against 500 random
labels, on AG News, 3 seeds.

    /usr/bin/python3 tests/bench/active_learning.py [--corpora ag,debian] [--seeds 3]
    /usr/bin/python3 tests/bench/active_learning.py --holdout --select per-label
    /usr/bin/python3 tests/bench/active_learning.py --holdout --select diverse --no-random
    /usr/bin/python3 tests/bench/active_learning.py --holdout --start 700 --rounds 0  # random
"""
import argparse
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from lesson_text import cpu_model  # noqa: E402
from quality import corpus_args, corpus_paths, read_csv, weighted  # noqa: E402


def fit_and_score(db, test_labels, options):
    summary = json.loads(db.execute("SELECT attn_fit('m', 'SELECT text, label FROM pool', ?)",
                                    (json.dumps(dict(options, progress=False)),)).fetchone()[0])
    pred = [r[0] for r in db.execute(
        "SELECT label FROM attn_classify('m', 'SELECT rowid, text FROM test') ORDER BY id")]
    return weighted(test_labels, pred)[0], summary


SELECT_SQL = {
    "margin": "SELECT id FROM attn_uncertain('m', 'SELECT id, text FROM pool WHERE label IS NULL') "
              "LIMIT ?",
    "diverse": "SELECT id FROM attn_uncertain('m', 'SELECT id, text FROM pool WHERE label IS NULL', "
               "json_object('diverse', ?1)) LIMIT ?1",
    "per-label": "SELECT id FROM (SELECT id, margin, row_number() OVER (PARTITION BY label ORDER "
                 "BY margin, entropy DESC) AS turn FROM attn_uncertain('m', 'SELECT id, text FROM "
                 "pool WHERE label IS NULL')) ORDER BY turn, margin LIMIT ?",
}


def perturbed_select(db, batch, kind, seed, passes=8, drop=0.2):
    """Measured, not in attn_uncertain (tests/bench/RESULTS.md): each unlabelled text classified
    `passes` more times with each word dropped with probability `drop`, the mean of those
    distributions taken. "mean-margin": its margin ascending; "per-label-mean-margin": the same
    in turns across its top labels; "bald": the mutual information between the prediction and
    the perturbation (entropy of the mean less the mean entropy), descending."""
    rng = random.Random(seed)
    copies = []
    for i, t in db.execute("SELECT id, text FROM pool WHERE label IS NULL").fetchall():
        words = t.split()
        for _ in range(passes):
            copies.append((i, " ".join([w for w in words if rng.random() >= drop] or words[:1])))
    db.execute("CREATE TEMP TABLE IF NOT EXISTS copies(k INTEGER PRIMARY KEY, id, text)")
    db.execute("DELETE FROM copies")
    db.executemany("INSERT INTO copies(id, text) VALUES (?, ?)", copies)
    mean, mean_entropy = {}, {}
    for i, label, p in db.execute("SELECT c.id, a.label, a.probability FROM copies c, "
                                  "attn_probs('m', c.text) a"):
        m = mean.setdefault(i, {})
        m[label] = m.get(label, 0.0) + p / passes
        if p > 0:
            mean_entropy[i] = mean_entropy.get(i, 0.0) - p * math.log(p) / passes
    scores = []  # (id, mutual information, margin of the mean, its top label)
    for i, m in mean.items():
        top = sorted(m.values(), reverse=True) + [0.0]
        entropy = -sum(p * math.log(p) for p in m.values() if p > 0)
        scores.append((i, entropy - mean_entropy.get(i, 0.0), top[0] - top[1], max(m, key=m.get)))
    if kind == "bald":
        scores.sort(key=lambda x: (-x[1], x[2]))
        return [x[0] for x in scores[:batch]]
    scores.sort(key=lambda x: (x[2], -x[1]))
    if kind == "per-label-mean-margin":
        turn, count = {}, {}
        for x in scores:
            count[x[3]] = turn[x[0]] = count.get(x[3], 0) + 1
        scores.sort(key=lambda x: (turn[x[0]], x[2]))
    return [x[0] for x in scores[:batch]]


PERTURBED = ("mean-margin", "per-label-mean-margin", "bald")


def unlabelled_distributions(db):
    """{id: [(probability, label), ...]} of every unlabelled row of the pool (attn_probs)."""
    dist = {}
    for i, label, p in db.execute("SELECT u.id, a.label, a.probability FROM pool u, "
                                  "attn_probs('m', u.text) a WHERE u.label IS NULL"):
        dist.setdefault(i, []).append((p, label))
    return dist


def pair_turns_select(db, batch):
    """Measured, not kept: the margin order in turns across the pairs of the two most probable
    labels (the decision boundaries), so that a round spreads over every boundary the model is
    unsure about, not one pair of labels."""
    rows = []
    for i, d in unlabelled_distributions(db).items():
        d.sort(reverse=True)
        second = d[1] if len(d) > 1 else (0.0, "")
        rows.append((d[0][0] - second[0], i, tuple(sorted((d[0][1], second[1])))))
    rows.sort()
    turn, count = {}, {}
    for margin, i, pair in rows:
        count[pair] = turn[i] = count.get(pair, 0) + 1
    rows.sort(key=lambda x: (turn[x[1]], x[0]))
    return [i for _, i, _ in rows[:batch]]


def power_rank_select(db, batch, seed):
    """Measured, not kept: `batch` rows drawn without replacement from attn_uncertain's order,
    the row at rank r (1 = least sure) with weight 1 / r (stochastic batch acquisition: the
    Gumbel top-k of log(1 / r))."""
    rng = random.Random(seed)
    ids = [r[0] for r in db.execute("SELECT id FROM attn_uncertain('m', 'SELECT id, text FROM "
                                    "pool WHERE label IS NULL')")]
    keys = [(-math.log(r + 1) - math.log(-math.log(rng.random() or 1e-300)), i)
            for r, i in enumerate(ids)]
    return [i for _, i in sorted(keys, reverse=True)[:batch]]


def fc1_layer(db):
    """The deployed model's fc1 (weight (F, D), bias (F)) from its safetensors BLOB, or None."""
    import struct
    import numpy as np
    blob = db.execute("SELECT weights FROM attn_models WHERE name = 'm' AND deployed = 1 "
                      "ORDER BY version DESC").fetchone()[0]
    n = struct.unpack("<Q", blob[:8])[0]
    head = json.loads(blob[8:8 + n])
    if "fc1.weight" not in head:
        return None
    def tensor(name):
        t = head[name]
        a, b = t["data_offsets"]
        return np.frombuffer(blob[8 + n + a:8 + n + b], dtype="<f4").reshape(t["shape"])
    return tensor("fc1.weight").astype(np.float64), tensor("fc1.bias").astype(np.float64)


def badge_select(db, batch, seed, candidates=0, greedy=False, penultimate=False, turns=False,
                 relu=True):
    """Measured: BADGE (Ash et al., 2020). Each unlabelled text's gradient embedding, the
    gradient of the loss at its predicted label with respect to the last layer, (p - onehot(top))
    outer the attention context (attn_embed), and k-means++ seeding over those: the first the
    longest, each next drawn with probability proportional to its squared distance to the
    nearest chosen one. Long vectors are uncertain rows; distance spreads the round."""
    import numpy as np
    rng = np.random.default_rng(seed)
    probs = {i: {label: p for p, label in d} for i, d in unlabelled_distributions(db).items()}
    labels = sorted({l for d in probs.values() for l in d})
    ids, ctx = [], []
    for i, blob in db.execute("SELECT id, attn_embed('m', text) FROM pool WHERE label IS NULL"):
        ids.append(i)
        ctx.append(np.frombuffer(blob, dtype="<f4"))
    ctx = np.array(ctx, dtype=np.float64)
    p = np.array([[probs[i].get(l, 0.0) for l in labels] for i in ids])
    if candidates and len(ids) > candidates:  # only the least sure by margin
        top2 = -np.sort(-p, axis=1)[:, :2]
        keep = np.argsort(top2[:, 0] - top2[:, 1], kind="stable")[:candidates]
        ids, ctx, p = [ids[k] for k in keep], ctx[keep], p[keep]
    fc1 = fc1_layer(db) if penultimate else None
    if fc1 is not None:  # the last layer's input: fc1's activations, not the context
        ctx = ctx @ fc1[0].T + fc1[1]
        if relu:  # measured so; fc2 reads fc1's output with no activation between
            ctx = np.maximum(ctx, 0.0)
    g = p.copy()
    g[np.arange(len(ids)), p.argmax(1)] -= 1.0
    emb = (g[:, :, None] * ctx[:, None, :]).reshape(len(ids), -1)
    chosen = [int(np.argmax((emb * emb).sum(1)))]
    dist = ((emb - emb[chosen[0]]) ** 2).sum(1)
    top = p.argmax(1)
    while len(chosen) < min(batch, len(ids)):
        if dist.sum() <= 0:  # every row left is one already chosen: draw among the others
            dist = np.ones(len(ids))
            dist[chosen] = 0.0
        w = dist
        if turns:  # the next label in turn, among the rows predicted as it
            for step in range(len(labels)):
                lab = (len(chosen) + step) % len(labels)
                masked = np.where(top == lab, dist, 0.0)
                if masked.sum() > 0:
                    w = masked
                    break
        k = int(np.argmax(w)) if greedy else int(rng.choice(len(ids), p=w / w.sum()))
        chosen.append(k)
        dist = np.minimum(dist, ((emb - emb[k]) ** 2).sum(1))
    return [ids[k] for k in chosen]


def density_select(db, batch, neighbours=20, beta=1.0):
    """Measured: information density (Settles and Craven, 2008). Each unlabelled text's
    uncertainty, 1 - margin, times the mean cosine similarity of its attention context
    (attn_embed) to its `neighbours` nearest unlabelled texts, to the power beta: a text unsure
    and like many others, not an outlier the model is unsure of because nothing is like it."""
    import numpy as np
    dist = unlabelled_distributions(db)
    ids, ctx = [], []
    for i, blob in db.execute("SELECT id, attn_embed('m', text) FROM pool WHERE label IS NULL"):
        ids.append(i)
        ctx.append(np.frombuffer(blob, dtype="<f4"))
    x = np.array(ctx, dtype=np.float32)
    x /= np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    dens = np.empty(len(ids))
    for lo in range(0, len(ids), 1000):
        sim = x[lo:lo + 1000] @ x.T
        k = min(neighbours + 1, len(ids))
        top = -np.partition(-sim, k - 1, axis=1)[:, :k]  # itself among them (1.0)
        dens[lo:lo + 1000] = (top.sum(1) - 1.0) / max(k - 1, 1)
    score = []
    for j, i in enumerate(ids):
        d = sorted(dist[i], reverse=True)
        margin = d[0][0] - (d[1][0] if len(d) > 1 else 0.0)
        score.append(((1.0 - margin) * max(dens[j], 0.0) ** beta, -i))
    score.sort(reverse=True)
    return [-i for _, i in score[:batch]]


def _pool_features(db, where, fc1=None):
    """ids, attention contexts (or fc1's activations when fc1 is given) and probabilities
    (columns in sorted label order) of the pool's rows matching `where`."""
    import numpy as np
    ids, ctx = [], []
    for i, blob in db.execute("SELECT id, attn_embed('m', text) FROM pool WHERE " + where):
        ids.append(i)
        ctx.append(np.frombuffer(blob, dtype="<f4"))
    x = np.array(ctx, dtype=np.float64)
    if fc1 is not None:
        x = np.maximum(x @ fc1[0].T + fc1[1], 0.0)
    dist = {}
    for i, label, p in db.execute("SELECT u.id, a.label, a.probability FROM pool u, "
                                  "attn_probs('m', u.text) a WHERE u." + where):
        dist.setdefault(i, {})[label] = p
    return ids, x, dist


def cal_select(db, batch, neighbours=10, penultimate=False):
    """Measured: contrastive active learning (Margatina et al., 2021). Each unlabelled text
    scored by the mean KL divergence from its `neighbours` nearest labelled texts' predicted
    distributions (cosine on the attention context) to its own: a text the model puts apart
    from the labelled texts that look like it."""
    import numpy as np
    fc1 = fc1_layer(db) if penultimate else None
    uid, ux, ud = _pool_features(db, "label IS NULL", fc1)
    lid, lx, ld = _pool_features(db, "label IS NOT NULL", fc1)
    labels = sorted({l for d in list(ud.values()) + list(ld.values()) for l in d})
    up = np.array([[ud[i].get(l, 0.0) for l in labels] for i in uid]) + 1e-12
    lp = np.array([[ld[i].get(l, 0.0) for l in labels] for i in lid]) + 1e-12
    ux /= np.maximum(np.linalg.norm(ux, axis=1, keepdims=True), 1e-12)
    lx /= np.maximum(np.linalg.norm(lx, axis=1, keepdims=True), 1e-12)
    k = min(neighbours, len(lid))
    score = np.empty(len(uid))
    for lo in range(0, len(uid), 1000):
        sim = ux[lo:lo + 1000] @ lx.T
        nn = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        pl = lp[nn]  # (rows, k, C)
        pu = up[lo:lo + 1000][:, None, :]
        score[lo:lo + 1000] = (pl * (np.log(pl) - np.log(pu))).sum(2).mean(1)
    order = np.lexsort((np.array(uid), -score))
    return [uid[j] for j in order[:batch]]


def typiclust_select(db, batch, seed, neighbours=20, penultimate=False):
    """Measured: TypiClust (Hacohen et al., 2022), for budgets of a few hundred labels. The
    pool (labelled and not) in |labelled| + batch k-means clusters of the attention context;
    each pick the most typical unlabelled text (the inverse of the mean distance to its
    `neighbours` nearest in its cluster) of the largest cluster with the fewest labels."""
    import numpy as np
    rng = np.random.default_rng(seed)
    fc1 = fc1_layer(db) if penultimate else None
    ids, x, _ = _pool_features(db, "id >= 0", fc1)
    labelled = {r[0] for r in db.execute("SELECT id FROM pool WHERE label IS NOT NULL")}
    lab = np.array([i in labelled for i in ids])
    k = len(labelled) + batch
    # k-means++ seeding then Lloyd's iterations
    centres = [x[rng.integers(len(x))]]
    d2 = ((x - centres[0]) ** 2).sum(1)
    for _ in range(k - 1):
        c = x[rng.choice(len(x), p=d2 / d2.sum())] if d2.sum() > 0 else x[rng.integers(len(x))]
        centres.append(c)
        d2 = np.minimum(d2, ((x - c) ** 2).sum(1))
    c = np.array(centres)
    xx = (x * x).sum(1)
    for _ in range(20):
        assign = np.argmin(xx[:, None] - 2 * x @ c.T + (c * c).sum(1)[None, :], axis=1)
        for j in range(k):
            m = assign == j
            if m.any():
                c[j] = x[m].mean(0)
    size = np.bincount(assign, minlength=k)
    nlab = np.bincount(assign[lab], minlength=k)
    taken = lab.copy()
    chosen = []
    while len(chosen) < batch:
        free = np.array([((assign == j) & ~taken).any() for j in range(k)])
        if not free.any():
            break
        key = np.where(free, nlab * 1e9 - size, np.inf)
        j = int(np.argmin(key))
        members = np.where(assign == j)[0]
        cand = members[~taken[members]]
        xm = x[members]
        dm = np.sqrt(np.maximum(((x[cand][:, None, :] - xm[None, :, :]) ** 2).sum(2), 0))
        kk = min(neighbours, len(members) - 1)
        if kk <= 0:
            best = cand[0]
        else:
            near = np.sort(dm, axis=1)[:, 1:kk + 1].mean(1)
            best = cand[int(np.argmin(near))]
        chosen.append(ids[best])
        taken[best] = True
        nlab[j] += 1
    return chosen


def run(extension, pool, test, labelled_ids, rounds, batch, options, uncertain, select="margin",
        select_options=None):
    d = tempfile.mkdtemp(prefix="attnext-active-")
    db = sqlite3.connect(os.path.join(d, "a.db"), isolation_level=None)
    try:
        db.enable_load_extension(True)
        db.load_extension(extension)
        db.execute("BEGIN")
        db.execute("CREATE TABLE pool(id INTEGER PRIMARY KEY, text, label, truth)")
        db.execute("CREATE TABLE test(text, label)")
        db.executemany("INSERT INTO pool VALUES (?, ?, NULL, ?)",
                       [(i, t, l) for i, (t, l) in enumerate(pool)])
        db.executemany("INSERT INTO test VALUES (?, ?)", test)
        db.execute("UPDATE pool SET label = truth WHERE id IN (%s)"
                   % ",".join(str(i) for i in labelled_ids))
        db.execute("COMMIT")
        labels = [r[1] for r in test]
        curve = []
        start = time.perf_counter()
        for _ in range(rounds if uncertain else 0):
            f1, _ = fit_and_score(db, labels, options if select_options is None
                                  else select_options)
            n = db.execute("SELECT count(label) FROM pool").fetchone()[0]
            curve.append((n, f1))
            if select == "pair-turns":
                ids = pair_turns_select(db, batch)
            elif select == "badge":
                ids = badge_select(db, batch, 7919 * n + len(curve))
            elif select == "badge-fc":  # the gradient of the true last layer, fc2
                ids = badge_select(db, batch, 7919 * n + len(curve), penultimate=True)
            elif select == "badge-fc-linear":  # fc1's output as fc2 reads it, no ReLU
                ids = badge_select(db, batch, 7919 * n + len(curve), penultimate=True, relu=False)
            elif select == "badge-fc-turns":  # and in turns across the predicted labels
                ids = badge_select(db, batch, 7919 * n + len(curve), penultimate=True, turns=True)
            elif select == "badge-greedy":  # farthest first (k-center), not D^2 sampling
                ids = badge_select(db, batch, 0, greedy=True)
            elif select.startswith("badge-"):
                ids = badge_select(db, batch, 7919 * n + len(curve), int(select[6:]))
            elif select in ("cal", "cal-fc"):
                ids = cal_select(db, batch, penultimate=select == "cal-fc")
            elif select in ("typiclust", "typiclust-fc"):
                ids = typiclust_select(db, batch, 7919 * n + len(curve),
                                       penultimate=select == "typiclust-fc")
            elif select == "density":
                ids = density_select(db, batch)
            elif select == "power-rank":
                ids = power_rank_select(db, batch, 7919 * n + len(curve))
            elif select in PERTURBED:
                ids = perturbed_select(db, batch, select, 7919 * n + len(curve))
            else:
                ids = [r[0] for r in db.execute(SELECT_SQL[select], (batch,))]
            db.execute("UPDATE pool SET label = truth WHERE id IN (%s)" % ",".join(map(str, ids)))
        f1, summary = fit_and_score(db, labels, options)
        n = db.execute("SELECT count(label) FROM pool").fetchone()[0]
        curve.append((n, f1))
        counts = dict(db.execute("SELECT label, count(*) FROM pool WHERE label IS NOT NULL "
                                 "GROUP BY label ORDER BY label").fetchall())
        return {"test_f1": f1, "labels": n, "curve": curve, "label_counts": counts,
                "self_training": summary.get("self_training"),
                "seconds": time.perf_counter() - start}
    finally:
        db.close()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--corpora", default="ag")
    corpus_args(ap)
    ap.add_argument("--extension", default=os.path.join(ROOT, "attnext"))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. + seeds - 1")
    ap.add_argument("--start", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--pool", type=int, default=10000, help="training rows in the pool")
    ap.add_argument("--options", default="{}")
    ap.add_argument("--select-options", default=None,
                    help="attn_fit's options for the models that choose (the last fit takes "
                         "--options)")
    ap.add_argument("--holdout", action="store_true",
                    help="score on held-out training rows (a pool of the shuffle's first "
                         "--pool less 2,000 rows, the next 2,000 scored), not the test split")
    ap.add_argument("--no-random", action="store_true", help="the uncertain arm only")
    ap.add_argument("--select", default="margin",
                    choices=sorted(SELECT_SQL) + list(PERTURBED) + ["power-rank", "pair-turns"]
                    + ["badge", "badge-fc", "badge-fc-linear", "badge-fc-turns", "badge-greedy", "badge-1000", "badge-2000", "density"]
                    + ["cal", "cal-fc", "typiclust", "typiclust-fc"],
                    help="how a round picks its rows (the docstring)")
    ap.add_argument("--out", default=os.path.join(HERE, "out"))
    args = ap.parse_args()
    if args.holdout and args.pool <= 2000:
        ap.error("--holdout needs --pool above 2,000 (its last 2,000 rows are scored)")
    options = json.loads(args.options)
    total = args.start + args.rounds * args.batch
    report = {"machine": cpu_model(), "cores": os.cpu_count(), "time": time.strftime("%F %T"),
              "args": vars(args), "scored_on": "held-out training rows" if args.holdout
              else "the test split", "corpora": {}}
    print("# attn_uncertain against random labels (%s, %d cores): %d random labels + %d rounds "
          "of %d, against %d random labels" % (report["machine"], report["cores"], args.start,
                                               args.rounds, args.batch, total))
    for corpus in args.corpora.split(","):
        train_path, test_path = corpus_paths(corpus, args)
        train, test = read_csv(train_path), read_csv(test_path)
        rows = []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            pool = train[:]
            random.Random(seed).shuffle(pool)
            if args.holdout:
                if len(pool) < args.pool:
                    sys.exit("active_learning: %s has %d training rows, fewer than --pool %d"
                             % (corpus, len(pool), args.pool))
                test = pool[args.pool - 2000:args.pool]
                pool = pool[:args.pool - 2000]
            else:
                pool = pool[:args.pool]
            order = list(range(len(pool)))
            random.Random(1000 + seed).shuffle(order)
            print("active: %s seed %d: uncertain" % (corpus, seed), file=sys.stderr, flush=True)
            u = run(args.extension, pool, test, order[:args.start], args.rounds, args.batch,
                    options, True, args.select,
                    None if args.select_options is None else json.loads(args.select_options))
            print("active: %s seed %d: random" % (corpus, seed), file=sys.stderr, flush=True)
            r = None if args.no_random else run(args.extension, pool, test, order[:total], 0,
                                                0, options, False)
            rows.append({"seed": seed, "uncertain": u, "random": r})
            print("%s seed %d: uncertain %.3f (%s)%s" % (
                corpus, seed, u["test_f1"], " ".join("%d:%.3f" % p for p in u["curve"]),
                ", random %.3f" % r["test_f1"] if r else ""), flush=True)
        mu = statistics.mean(x["uncertain"]["test_f1"] for x in rows)
        mr = None if args.no_random else statistics.mean(x["random"]["test_f1"] for x in rows)
        print("%s: mean over %d seeds: uncertain %.3f%s"
              % (corpus, args.seeds, mu, "" if mr is None else
                 ", random %.3f, difference %+.3f" % (mr, mu - mr)), flush=True)
        report["corpora"][corpus] = {"runs": rows, "uncertain": mu, "random": mr}
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "active-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    with open(path, "w") as f:
        json.dump(report, f, indent=1)
    print("figures: %s" % os.path.relpath(path, ROOT))


if __name__ == "__main__":
    main()
