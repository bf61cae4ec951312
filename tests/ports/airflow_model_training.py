"""An Airflow 3 TaskFlow DAG that trains and compares models, as the TaskFlow guides suggest structuring ML
work: a task that builds the dataset, one training task per regularisation strength mapped with `.expand()`
over a module-level list and the data given whole with `.partial()`, a mapped evaluation zipped by order, a
task choosing the best model, and `chain(...)` ordering a validation step before the choice. scikit-learn's
ridge regression on a synthetic regression problem; every task defined inside the `@dag` function.

Kept as Airflow users write it; the DAG function returns the chosen model's summary (Airflow 3's DAG result).
"""

from __future__ import annotations

import pendulum
from airflow.sdk import chain, dag, task

ALPHAS = [0.1, 1.0, 10.0, 100.0]


@dag(schedule=None, start_date=pendulum.datetime(2024, 1, 1, tz="UTC"), catchup=False, tags=["ml"])
def ridge_training(n_samples: int = 300, seed: int = 5):
    @task
    def make_dataset(n_samples: int, seed: int) -> dict:
        from sklearn.datasets import make_regression
        from sklearn.model_selection import train_test_split

        X, y = make_regression(n_samples=n_samples, n_features=8, noise=12.0, random_state=seed)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=seed)
        return {"X_train": X_train.tolist(), "y_train": y_train.tolist(), "X_test": X_test.tolist(),
                "y_test": y_test.tolist()}

    @task
    def validate(data: dict) -> bool:
        assert len(data["X_train"]) == len(data["y_train"])
        print(f"{len(data['X_train'])} training rows")
        return True

    @task(retries=1)
    def train(data: dict, alpha: float) -> dict:
        from sklearn.linear_model import Ridge

        model = Ridge(alpha=alpha).fit(data["X_train"], data["y_train"])
        return {"alpha": alpha, "coef": [round(float(c), 5) for c in model.coef_],
                "intercept": round(float(model.intercept_), 5)}

    @task
    def evaluate(model: dict, data: dict) -> dict:
        import numpy as np

        X, y = np.array(data["X_test"]), np.array(data["y_test"])
        pred = X @ np.array(model["coef"]) + model["intercept"]
        rmse = float(np.sqrt(np.mean((pred - y) ** 2)))
        return {"alpha": model["alpha"], "rmse": round(rmse, 4)}

    @task
    def choose(scores: list) -> dict:
        best = min(scores, key=lambda s: (s["rmse"], s["alpha"]))
        return {"best_alpha": best["alpha"], "rmse": best["rmse"], "tried": [s["alpha"] for s in scores]}

    data = make_dataset(n_samples, seed)
    checked = validate(data)
    models = train.partial(data=data).expand(alpha=ALPHAS)
    scores = evaluate.partial(data=data).expand(model=models)
    best = choose(scores)
    chain(checked, best)
    return best


ridge_training()
