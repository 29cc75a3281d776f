"""process_results of auditkit_arith_gen (loaded by lm-eval from the YAML's
``!function utils.process_results``)."""

MAX_ERROR = 100.0  # the error of an answer with no number in it


def process_results(doc, results):
    """exact_match: the filtered answer equals the target; abs_error: how far
    the number in it is from the target (MAX_ERROR when there is none)."""
    pred = str(results[0]).strip()
    gold = str(doc["answer"]).strip()
    try:
        err = min(MAX_ERROR, abs(float(pred) - float(gold)))
    except ValueError:
        err = MAX_ERROR
    return {"exact_match": 1.0 if pred == gold else 0.0, "abs_error": err}
