"""A Prefect ETL flow (the extract → transform → load flows of Prefect's tutorials and its "data
pipeline" examples), ported to dagc.

Kept as Prefect users write it: `extract` tasks with retries that fetch an endpoint under a base URL and
parse it, one CSV export through `io.StringIO` and `csv.reader`, one JSON API's nested records through
`pd.json_normalize`; `transform` tasks that start with `df = df.copy()` and then assign columns; a `load`
task that writes the joined table to its target table and returns a summary of what it loaded; the base URL
and the table names are plain strings the flow passes to several tasks. Changed: `@task` is `@dagc.task`
(`retries=` kept), `@flow` is `@dagc.pipeline`. The HTTP client's `httpx.get(url).text` is `_get(url)`, a
deterministic stand-in for the remote service (no network in tests), and the warehouse is an in-memory
dict of rows.
"""

import csv
import io
import json
import random

import pandas as pd

import dagc

COUNTRIES = ["DE", "FR", "NL", "PL", "SE"]


def _get(url: str) -> str:
    """The body the service returns for `url` (`httpx.get(url).text`), always the same for one URL."""
    rng = random.Random(url)
    if url.endswith(".csv"):
        lines = ["order_id,customer_id,amount,currency,ordered_at"]
        for i in range(120):
            lines.append(f"{1000 + i},{rng.randrange(30)},{rng.uniform(5, 500):.2f},"
                         f"{rng.choice(['EUR', 'USD'])},2024-03-{1 + i % 28:02d}")
        return "\n".join(lines) + "\n"
    customers = [{"id": i, "name": f"customer {i}",
                  "address": {"country": rng.choice(COUNTRIES), "city": f"city-{rng.randrange(6)}"},
                  "tier": rng.choice(["free", "pro", "enterprise"])} for i in range(30)]
    return json.dumps({"data": customers, "next": None})


@dagc.task(cost="2s", retries=3)
def extract_orders(base_url: str, table: str) -> pd.DataFrame:
    text = _get(f"{base_url}/exports/{table}.csv")
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    rows = [row for row in reader if row]
    return pd.DataFrame(rows, columns=header)


@dagc.task(cost="2s", retries=3)
def extract_customers(base_url: str, table: str) -> pd.DataFrame:
    payload = json.loads(_get(f"{base_url}/api/{table}?page=1"))
    return pd.json_normalize(payload["data"], sep="_")


@dagc.task(cost="3s")
def transform_orders(df: pd.DataFrame, usd_to_eur: float) -> pd.DataFrame:
    df = df.copy()
    df["order_id"] = df["order_id"].astype(int)
    df["customer_id"] = df["customer_id"].astype(int)
    df["amount"] = df["amount"].astype(float)
    df["amount_eur"] = df["amount"].where(df["currency"] == "EUR", df["amount"] * usd_to_eur).round(2)
    df["ordered_at"] = pd.to_datetime(df["ordered_at"])
    df["week"] = df["ordered_at"].dt.isocalendar().week.astype(int)
    return df


@dagc.task(cost="3s")
def transform_customers(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df = df.rename(columns={"id": "customer_id", "address_country": "country", "address_city": "city"})
    df["is_paying"] = df["tier"] != "free"
    df["name"] = df["name"].str.title()
    return df


@dagc.task(cost="2s")
def load(orders: pd.DataFrame, customers: pd.DataFrame, base_url: str, table_name: str) -> dict:
    joined = orders.merge(customers, on="customer_id", how="left")
    warehouse = {table_name: joined.to_dict(orient="records")}  # stands in for `joined.to_sql(table_name, ...)`
    by_country = joined.groupby("country")["amount_eur"].sum().round(2)
    return {
        "source": base_url,
        "table": table_name,
        "rows": len(warehouse[table_name]),
        "paying_share": round(float(joined["is_paying"].mean()), 4),
        "revenue_eur": {country: float(total) for country, total in by_country.items()},
        "busiest_week": int(joined.groupby("week")["order_id"].count().idxmax()),
    }


@dagc.pipeline
def etl(base_url: str = "https://shop.example.com", orders_table: str = "orders",
        customers_table: str = "customers", target: str = "fact_orders"):
    orders = transform_orders(extract_orders(base_url, orders_table), usd_to_eur=0.92)
    customers = transform_customers(extract_customers(base_url, customers_table))
    return load(orders, customers, base_url, target)


if __name__ == "__main__":
    print(etl())
