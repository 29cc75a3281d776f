"""Build the small RAG dataset in this folder (deterministic, no network):

- corpus.jsonl: ~300 short documents with versions, supersession dates and
  access groups: spec sheets (current and superseded versions), marketing
  blurbs that repeat product names (lexical distractors), and restricted
  pricing sheets (access group "finance").
- questions.jsonl: questions with gold evidence ids, gold answers and gold
  numbers, user groups and a decision date; some have no evidence in the
  corpus (abstention expected), some hit stale or restricted documents.

    python examples/rag/build_data.py
"""

from __future__ import annotations

import json
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
NAMES = ["Aurora", "Borealis", "Cascade", "Delta", "Ember", "Fjord", "Glacier", "Harbor", "Iris", "Juniper",
         "Kestrel", "Lumen", "Meridian", "Nimbus", "Orchid", "Pinnacle", "Quartz", "Raven", "Sierra", "Tundra",
         "Umber", "Vertex", "Willow", "Xenon", "Yarrow", "Zenith", "Atlas", "Beacon", "Comet", "Dune"]
KINDS = ["router", "switch", "gateway", "sensor", "camera"]
DECISION_DATE = "2026-06-01"


def build(seed: int = 11) -> tuple[list[dict], list[dict]]:
    rng = random.Random(seed)
    docs: list[dict] = []
    questions: list[dict] = []
    for i, name in enumerate(NAMES):
        kind = KINDS[i % len(KINDS)]
        product = f"{name} {kind}"
        slug = name.lower()
        throughput = rng.randint(2, 40) * 25
        old_throughput = throughput - rng.randint(1, 8) * 25
        weight = round(rng.uniform(0.4, 6.0), 1)
        price = rng.randint(80, 900)
        filler = ["It ships with a quick start guide.", "The enclosure is recyclable aluminium.",
                  "Firmware updates are signed.", "The status light is blue when ready.",
                  "Spare parts are stocked for seven years.", "The fan is temperature controlled."]
        v1_extra = " ".join(rng.sample(filler, rng.randint(0, 3)))
        v2_extra = " ".join(rng.sample(filler, rng.randint(0, 5)))
        hype = " ".join(f"{name} {rng.choice(['is fast', 'is reliable', 'leads on throughput', 'is maximum value'])}."
                        for _ in range(rng.randint(1, 6)))
        docs.append(
            {
                "id": f"{slug}-spec-v1",
                "title": f"{product} specification (v1)",
                "version": "1",
                "date": "2024-03-01",
                "superseded_at": "2025-09-15",
                "access_groups": ["public"],
                "text": f"The {product} has a maximum throughput of {old_throughput} megabits per second "
                f"and weighs {weight} kilograms. {v1_extra}",
            }
        )
        docs.append(
            {
                "id": f"{slug}-spec-v2",
                "title": f"{product} specification (v2)",
                "version": "2",
                "date": "2025-09-15",
                "access_groups": ["public"],
                "text": f"Maximum throughput of the {product}: {throughput} megabits per second. "
                f"Weight: {weight} kilograms. "
                f"Operating temperature from 0 to {rng.randint(40, 60)} degrees. {v2_extra}",
            }
        )
        docs.append(
            {
                "id": f"{slug}-blurb",
                "title": f"Meet the {product}",
                "version": "1",
                "date": "2025-01-10",
                "access_groups": ["public"],
                "text": f"The {name} {kind} family. {hype} Customers love the {name} {kind}. Ask about {name} today.",
            }
        )
        docs.append(
            {
                "id": f"{slug}-pricing",
                "title": f"{product} price list",
                "version": "1",
                "date": "2025-10-01",
                "access_groups": ["finance"],
                "text": f"Internal list price of the {product}: {price} dollars per unit.",
            }
        )
        docs.append(
            {
                "id": f"{slug}-faq",
                "title": f"{product} FAQ",
                "version": "1",
                "date": "2025-05-05",
                "access_groups": ["public"],
                "text": f"Does the {product} support remote management? Yes. Can the {kind} be mounted on a wall? "
                f"Yes, with the bracket kit. How do I reset it? Hold the button for ten seconds.",
            }
        )
        for j in range(5):  # generic notes that share vocabulary
            docs.append(
                {
                    "id": f"{slug}-note-{j}",
                    "title": f"Field note {j} on {kind}s",
                    "version": "1",
                    "date": "2025-02-0{j + 1}",
                    "access_groups": ["public"],
                    "text": f"Field note about {kind} installations number {j}: measured weight, cabling and "
                    "throughput "
                    f"in site {rng.randint(100, 999)}.",
                }
            )
        if i < 16:
            questions.append(
                {
                    "id": f"q-{slug}-throughput",
                    "question": f"What is the maximum throughput of the {product}?",
                    "answer": f"{throughput} megabits per second",
                    "gold_evidence": [f"{slug}-spec-v2"],
                    "gold_numbers": [throughput],
                    "user_groups": ["public"],
                    "answerable": True,
                    "decision_date": DECISION_DATE,
                }
            )
        elif i < 24:
            questions.append({"id": f"q-{slug}-weight", "question": f"How much does the {product} weigh in kilograms?",
                              "answer": f"{weight} kilograms", "gold_evidence": [f"{slug}-spec-v2"],
                              "gold_numbers": [weight], "user_groups": ["public"], "answerable": True,
                              "decision_date": DECISION_DATE})
        else:
            questions.append({"id": f"q-{slug}-price", "question": f"What is the list price of the {product} per unit?",
                              "answer": "I cannot answer that from the available documents.", "gold_evidence": [],
                              "gold_numbers": [], "user_groups": ["public"], "answerable": False,
                              "decision_date": DECISION_DATE})
    for name in ["Zephyr", "Obsidian", "Marlin", "Saffron"]:  # no documents at all
        questions.append(
            {
                "id": f"q-{name.lower()}-missing",
                "question": f"What is the maximum throughput of the {name} hub?",
                "answer": "I cannot answer that from the available documents.",
                "gold_evidence": [],
                "gold_numbers": [],
                "user_groups": ["public"],
                "answerable": False,
                "decision_date": DECISION_DATE,
            }
        )
    return docs, questions


def main() -> None:
    docs, questions = build()
    with open(HERE / "corpus.jsonl", "w") as f:
        for d in docs:
            f.write(json.dumps(d, sort_keys=True) + "\n")
    with open(HERE / "questions.jsonl", "w") as f:
        for q in questions:
            f.write(json.dumps(q, sort_keys=True) + "\n")
    print(f"wrote {len(docs)} documents and {len(questions)} questions to {HERE}")


if __name__ == "__main__":
    main()
