"""A Kubeflow Pipelines (kfp v2) lightweight-component pipeline, ported to dagc.

Kept as kfp users write it: every component imports what it uses inside its body (kfp ships the
function's source alone to a container), including `import random`; a data-preparation component; a
`dsl.ParallelFor` over learning rates, each training a small model from its own seed; a component
choosing the best run. Changed: `@dsl.component` is `@dagc.task`, `@dsl.pipeline` is `@dagc.pipeline`, and
`ParallelFor` is a plain loop (dagc finds the independent iterations).
"""

import dagc

LEARNING_RATES = [0.05, 0.1, 0.2, 0.4]


@dagc.task(cost="2s")
def prepare_data(n: int, seed: int) -> dict:
    import random

    rng = random.Random(seed)
    xs = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(n)]
    ys = [1.0 if x[0] + 0.5 * x[1] - x[2] > 0 else 0.0 for x in xs]
    split = int(0.8 * n)
    return {"train": (xs[:split], ys[:split]), "test": (xs[split:], ys[split:])}


@dagc.task(cost="30s")
def train_model(data: dict, learning_rate: float, seed: int) -> dict:
    import math
    import random

    random.seed(seed)
    weights = [random.gauss(0, 0.1) for _ in range(3)]
    bias = 0.0
    xs, ys = data["train"]
    for _ in range(20):
        for x, y in zip(xs, ys):
            p = 1 / (1 + math.exp(-(sum(w * v for w, v in zip(weights, x)) + bias)))
            for k in range(3):
                weights[k] -= learning_rate * (p - y) * x[k]
            bias -= learning_rate * (p - y)
    print(f"trained with learning_rate={learning_rate}")
    return {"weights": [round(w, 6) for w in weights], "bias": round(bias, 6), "learning_rate": learning_rate}


@dagc.task(cost="1s")
def evaluate_model(model: dict, data: dict) -> float:
    xs, ys = data["test"]
    correct = 0
    for x, y in zip(xs, ys):
        score = sum(w * v for w, v in zip(model["weights"], x)) + model["bias"]
        correct += int((score > 0) == (y > 0.5))
    return round(correct / len(ys), 4)


@dagc.task(cost="1s")
def choose_best(accuracies: list, learning_rates: list) -> dict:
    import json

    best = max(range(len(accuracies)), key=lambda i: accuracies[i])
    summary = {"learning_rate": learning_rates[best], "accuracy": accuracies[best]}
    print(json.dumps(summary))
    return summary


@dagc.pipeline
def training_pipeline(n: int = 400, seed: int = 3):
    data = prepare_data(n, seed)
    accuracies = []
    for i, learning_rate in enumerate(LEARNING_RATES):  # dsl.ParallelFor(LEARNING_RATES)
        model = train_model(data, learning_rate, seed + i)
        accuracies.append(evaluate_model(model, data))
    return choose_best(accuracies, LEARNING_RATES)


if __name__ == "__main__":
    print(training_pipeline())
