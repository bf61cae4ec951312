"""Kedro's spaceflights tutorial (the `data_processing` and `data_science` pipelines), ported to dagc.

Kept as Kedro users write it: nodes are plain functions over pandas DataFrames; `preprocess_companies` and
`preprocess_shuttles` parse the raw string columns in place with small private helpers (`_is_true`,
`_parse_percentage`, `_parse_money`) and return the frame; `create_model_input_table` merges the three
tables; `split_data` takes the `params:model_options` dict (`test_size`, `random_state`, `features`);
`train_model` fits a scikit-learn `LinearRegression`; `evaluate_model` logs and returns the R^2 (as
Kedro's experiment tracking records it). As in the tutorial's modular pipelines, the data science pipeline
runs twice, as the `active_modelling_pipeline` and the `candidate_modelling_pipeline` namespaces with their
own options. Changed: nodes are `@dagc.task`s and the Kedro `pipeline([node(...), ...])` is a
`@dagc.pipeline` calling them; the catalog's three raw CSV datasets are built by tasks from seeded
synthetic data (no files), in the raw datasets' string formats ("t"/"f", "95%", "$1,325.0").
"""

import logging

import numpy as np
import pandas as pd
from sklearn.linear_model import LinearRegression
from sklearn.metrics import max_error, mean_absolute_error, r2_score
from sklearn.model_selection import train_test_split

import dagc

logger = logging.getLogger(__name__)

# conf/base/parameters_data_science.yml
PARAMETERS = {
    "active_modelling_pipeline.model_options": {
        "test_size": 0.2,
        "random_state": 3,
        "features": ["engines", "passenger_capacity", "crew", "d_check_complete", "moon_clearance_complete",
                     "iata_approved", "company_rating", "review_scores_rating"],
    },
    "candidate_modelling_pipeline.model_options": {
        "test_size": 0.25,
        "random_state": 8,
        "features": ["engines", "passenger_capacity", "crew", "review_scores_rating"],
    },
}


# ---- the raw datasets of the catalog (companies.csv, shuttles.xlsx, reviews.csv) -------------------------
@dagc.task(cost="1s")
def companies(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.arange(n),
        "company_rating": [f"{r}%" for r in rng.integers(50, 101, n)],
        "company_location": rng.choice(["Niue", "Anguilla", "Russian Federation", "Barbados"], n),
        "total_fleet_count": rng.integers(1, 5, n).astype(float),
        "iata_approved": rng.choice(["t", "f"], n),
    })


@dagc.task(cost="1s")
def shuttles(n: int, n_companies: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed + 1)
    engines = rng.integers(1, 5, n)
    capacity = rng.integers(1, 9, n)
    crew = rng.integers(1, 5, n)
    d_check = rng.choice(["t", "f"], n)
    price = 500 + 180 * engines + 90 * capacity + 40 * crew + 120 * (d_check == "t") + rng.normal(0, 60, n)
    return pd.DataFrame({
        "id": np.arange(n) + 10_000,
        "shuttle_location": rng.choice(["Sao Tome and Principe", "Wallis and Futuna", "Niue"], n),
        "shuttle_type": rng.choice(["Type V5", "Type F5", "Type V2"], n),
        "engine_type": rng.choice(["Quantum", "Plasma"], n),
        "engines": engines.astype(float),
        "passenger_capacity": capacity,
        "crew": crew.astype(float),
        "d_check_complete": d_check,
        "moon_clearance_complete": rng.choice(["t", "f"], n),
        "price": [f"${p:,.1f}" for p in price],
        "company_id": rng.integers(0, n_companies, n),
    })


@dagc.task(cost="1s")
def reviews(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed + 2)
    return pd.DataFrame({
        "shuttle_id": np.arange(n) + 10_000,
        "review_scores_rating": rng.integers(60, 101, n).astype(float),
        "number_of_reviews": rng.integers(0, 200, n),
    })


# ---- pipelines/data_processing/nodes.py -----------------------------------------------------------------
def _is_true(x: pd.Series) -> pd.Series:
    return x == "t"


def _parse_percentage(x: pd.Series) -> pd.Series:
    x = x.str.replace("%", "")
    x = x.astype(float) / 100
    return x


def _parse_money(x: pd.Series) -> pd.Series:
    x = x.str.replace("$", "").str.replace(",", "")
    x = x.astype(float)
    return x


@dagc.task(cost="2s")
def preprocess_companies(companies: pd.DataFrame) -> pd.DataFrame:
    """Preprocesses the data for companies."""
    companies["iata_approved"] = _is_true(companies["iata_approved"])
    companies["company_rating"] = _parse_percentage(companies["company_rating"])
    return companies


@dagc.task(cost="2s")
def preprocess_shuttles(shuttles: pd.DataFrame) -> pd.DataFrame:
    """Preprocesses the data for shuttles."""
    shuttles["d_check_complete"] = _is_true(shuttles["d_check_complete"])
    shuttles["moon_clearance_complete"] = _is_true(shuttles["moon_clearance_complete"])
    shuttles["price"] = _parse_money(shuttles["price"])
    return shuttles


@dagc.task(cost="2s")
def create_model_input_table(shuttles: pd.DataFrame, companies: pd.DataFrame,
                             reviews: pd.DataFrame) -> pd.DataFrame:
    """Combines all data to create a model input table."""
    rated_shuttles = shuttles.merge(reviews, left_on="id", right_on="shuttle_id")
    rated_shuttles = rated_shuttles.drop("id", axis=1)
    model_input_table = rated_shuttles.merge(companies, left_on="company_id", right_on="id")
    model_input_table = model_input_table.dropna()
    return model_input_table


# ---- pipelines/data_science/nodes.py --------------------------------------------------------------------
@dagc.task(cost="1s")
def split_data(data: pd.DataFrame, parameters: dict) -> tuple:
    """Splits data into features and targets training and test sets."""
    X = data[parameters["features"]]
    y = data["price"]
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=parameters["test_size"], random_state=parameters["random_state"]
    )
    return X_train, X_test, y_train, y_test


@dagc.task(cost="5s")
def train_model(X_train: pd.DataFrame, y_train: pd.Series) -> LinearRegression:
    """Trains the linear regression model."""
    regressor = LinearRegression()
    regressor.fit(X_train, y_train)
    return regressor


@dagc.task(cost="1s")
def evaluate_model(regressor: LinearRegression, X_test: pd.DataFrame, y_test: pd.Series) -> dict:
    """Calculates and logs the coefficient of determination."""
    y_pred = regressor.predict(X_test)
    score = r2_score(y_test, y_pred)
    mae = mean_absolute_error(y_test, y_pred)
    me = max_error(y_test, y_pred)
    logger.info("Model has a coefficient R^2 of %.3f on test data.", score)
    return {"r2_score": round(float(score), 6), "mae": round(float(mae), 4), "max_error": round(float(me), 4)}


@dagc.task(cost="100ms")
def summarise(active: dict, candidate: dict, model_input_table: pd.DataFrame) -> dict:
    return {"rows": int(len(model_input_table)), "active_modelling_pipeline": active,
            "candidate_modelling_pipeline": candidate}


@dagc.pipeline
def spaceflights(n_companies: int = 40, n_shuttles: int = 300, seed: int = 2023):
    # data_processing
    preprocessed_companies = preprocess_companies(companies(n_companies, seed))
    preprocessed_shuttles = preprocess_shuttles(shuttles(n_shuttles, n_companies, seed))
    model_input_table = create_model_input_table(preprocessed_shuttles, preprocessed_companies,
                                                 reviews(n_shuttles, seed))
    # data_science, once per namespace
    metrics = {}
    for namespace in ("active_modelling_pipeline", "candidate_modelling_pipeline"):
        X_train, X_test, y_train, y_test = split_data(model_input_table, PARAMETERS[f"{namespace}.model_options"])
        regressor = train_model(X_train, y_train)
        metrics[namespace] = evaluate_model(regressor, X_test, y_test)
    return summarise(metrics["active_modelling_pipeline"], metrics["candidate_modelling_pipeline"],
                     model_input_table)


if __name__ == "__main__":
    print(spaceflights())
