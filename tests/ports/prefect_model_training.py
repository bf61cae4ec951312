"""A Prefect 3 training flow of the kind Prefect's ML guides describe: data loaded once by a task cached on
its inputs, one model trained per regularisation strength by `.map()` with the data `unmapped`, each scored
by a mapped task given the models' futures, a subflow that picks the best model and reports it, and a final
task with a timeout. scikit-learn's logistic regression on a synthetic classification problem.

Kept as Prefect users write it: `@task(cache_policy=INPUTS)`, `@task(timeout_seconds=...)`, `.map()` over a
module-level list of settings, futures passed on to the next mapped task, a nested `@flow`.
"""

from prefect import flow, task, unmapped
from prefect.cache_policies import INPUTS
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

C_VALUES = [0.01, 0.1, 1.0, 10.0]


@task(cache_policy=INPUTS)
def load_data(n_samples: int, seed: int) -> dict:
    X, y = make_classification(n_samples=n_samples, n_features=12, n_informative=6, random_state=seed)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=seed)
    return {"train": (X_train, y_train), "test": (X_test, y_test)}


@task(retries=1)
def train(data: dict, c: float, seed: int) -> LogisticRegression:
    X, y = data["train"]
    return LogisticRegression(C=c, max_iter=500, random_state=seed).fit(X, y)


@task
def score(model: LogisticRegression, data: dict) -> float:
    X, y = data["test"]
    return round(float(model.score(X, y)), 4)


@task
def pick_best(scores: list[float], c_values: list[float]) -> dict:
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return {"C": c_values[best], "accuracy": scores[best], "all": dict(zip(map(str, c_values), scores))}


@flow
def select_model(scores: list[float], c_values: list[float]) -> dict:
    best = pick_best(scores, c_values)
    print(f"best C={best['C']} accuracy={best['accuracy']}")
    return best


@task(timeout_seconds=120)
def coefficients(model: LogisticRegression) -> list[float]:
    return [round(float(w), 4) for w in model.coef_[0][:4]]


@flow(log_prints=True)
def training(n_samples: int = 600, seed: int = 7):
    data = load_data(n_samples, seed)
    models = train.map(unmapped(data), C_VALUES, seed=seed)
    scores = score.map(models, unmapped(data))
    best = select_model([s.result() for s in scores], C_VALUES)
    weights = coefficients.submit(models[0])
    return best, weights.result()


if __name__ == "__main__":
    print(training())
