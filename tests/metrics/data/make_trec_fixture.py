"""Writes qrels.test / results.test: a small fixture in the shape of
trec_eval's own test files (test/qrels.test, test/results.test).

qrels: ``qid 0 docno rel`` (graded 0..3; rel 0 = judged non-relevant).
results: ``qid Q0 docno rank sim runid``, sims printed with 6 decimals as
trec_eval's examples are, so ties occur; the rank column is deliberately
inconsistent in places because trec_eval ignores it (it sorts by sim, then
docno descending). Covered: ties (also across relevant/non-relevant docs),
unjudged docs, relevant docs never retrieved, a query with judgments but no
relevant doc, a run shorter than the cut-offs, negative sims.

Run once: python tests/metrics/data/make_trec_fixture.py (output committed).
"""
import random
from pathlib import Path

rng = random.Random(20240501)
here = Path(__file__).parent
prefixes = ["FR94", "FT92", "FBIS3-", "LA0101", "WSJ87", "AP88"]
qrels, results = [], []
for q in range(301, 321):
    docs = sorted({f"{rng.choice(prefixes)}{rng.randint(0, 9999):04d}" for _ in range(rng.randint(8, 40))})
    judged = rng.sample(docs, k=max(1, len(docs) // 2))
    for d in sorted(judged):
        rel = 0 if q == 310 else rng.choice([0, 0, 1, 1, 2, 3])
        qrels.append(f"{q} 0 {d} {rel}")
    for i in range(rng.randint(0, 3) if q != 310 else 0):  # relevant, never retrieved
        qrels.append(f"{q} 0 ZZ{q}{i:03d} {rng.choice([1, 2])}")
    n = len(docs) if q != 305 else 3
    run = rng.sample(docs, k=n)
    sims = []
    for i, d in enumerate(run):
        if i and rng.random() < 0.3:
            sim = sims[-1]  # a tie with the previous document
        else:
            sim = round(rng.uniform(-1.0, 5.0), 6)
        sims.append(sim)
    for rank, (d, sim) in enumerate(sorted(zip(run, sims), key=lambda t: -t[1]), 1):
        shown = rank if rng.random() > 0.1 else rng.randint(1, 50)
        results.append(f"{q}\tQ0\t{d}\t{shown}\t{sim:10.6f}\tSTANDARD")
(here / "qrels.test").write_text("\n".join(qrels) + "\n")
(here / "results.test").write_text("\n".join(results) + "\n")
