"""A Prefect 3 ETL flow in the shape of Prefect's "API-sourced ETL" example (examples/run_api_sourced_etl.py):
pages of articles fetched from a REST API by a task with retries and a list of retry delays, flattened with
`pd.json_normalize` into one table, saved as CSV by a task that prints a preview (`log_prints=True`).

Kept as Prefect users write it: `from prefect import flow, task`, the extract loop that appends one task call
per page, the flow's parameters given by the caller. Changed: `httpx.get(url, params=...).json()` is `_get`,
a deterministic stand-in for the remote API (no network in tests); the flow returns a summary of what it
saved, so that runs can be compared.
"""

from __future__ import annotations

import random
from typing import Any

import pandas as pd
from prefect import flow, task

TAGS = ["python", "ml", "devops", "rust", "data"]


def _get(url: str, params: dict[str, int]) -> list[dict[str, Any]]:
    """The JSON the API returns for `url` and `params`, always the same for the same request."""
    rng = random.Random(f"{url}?{sorted(params.items())}")
    first = (params["page"] - 1) * params["per_page"]
    return [{"id": first + i, "title": f"article {first + i}", "published_at": f"2024-05-{1 + i % 28:02d}",
             "url": f"https://dev.example/a/{first + i}", "comments_count": rng.randrange(40),
             "positive_reactions_count": rng.randrange(500), "tag_list": rng.sample(TAGS, 2),
             "user": {"username": f"user{rng.randrange(12)}"}} for i in range(params["per_page"])]


@task(retries=3, retry_delay_seconds=[2, 5, 15])
def fetch_page(page: int, api_base: str, per_page: int) -> list[dict[str, Any]]:
    """Return a list of article dicts for a given page number."""
    url = f"{api_base}/articles"
    params = {"page": page, "per_page": per_page}
    print(f"Fetching page {page} …")
    return _get(url, params)


@task
def to_dataframe(raw_articles: list[list[dict[str, Any]]]) -> pd.DataFrame:
    """Flatten & normalise JSON into a tidy DataFrame."""
    records = [article for page in raw_articles for article in page]
    df = pd.json_normalize(records)[
        ["id", "title", "published_at", "url", "comments_count", "positive_reactions_count", "tag_list",
         "user.username"]
    ]
    return df


@task
def save_csv(df: pd.DataFrame, path: str) -> dict:
    """Persist DataFrame to disk then log a preview."""
    df.to_csv(path, index=False)
    print(f"Saved {len(df)} rows ➜ {path}\n\nPreview:\n{df.head()}\n")
    top = df.sort_values("positive_reactions_count", ascending=False).iloc[0]
    return {"rows": len(df), "authors": int(df["user.username"].nunique()), "top": str(top["title"]),
            "comments": int(df["comments_count"].sum())}


@flow(name="devto_etl", log_prints=True)
def etl(api_base: str = "https://dev.example/api", pages: int = 3, per_page: int = 30,
        output_file: str = "devto_articles.csv") -> dict:
    """Run the end-to-end ETL for *pages* of articles."""

    # Extract – simple loop for clarity
    raw_pages: list[list[dict[str, Any]]] = []
    for page_number in range(1, pages + 1):
        raw_pages.append(fetch_page(page_number, api_base, per_page))

    # Transform
    df = to_dataframe(raw_pages)

    # Load
    return save_csv(df, output_file)


if __name__ == "__main__":
    print(etl(api_base="https://dev.example/api", pages=3, per_page=30, output_file="devto_articles.csv"))
