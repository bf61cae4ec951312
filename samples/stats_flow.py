"""A statistics flow written the way Metaflow users write theirs: a class of steps.

In Metaflow this is `class MovieStatsFlow(FlowSpec)` whose `@step` methods keep artifacts on
`self` and name the next step with `self.next(...)`, fanning out with `foreach`. Here the steps
are `@dagc.task` static (or class) methods that take their inputs and return their outputs, and
`run` calls them in order: the data flow is the order. The fan-out is Metaflow's `foreach`: over
the genres a step finds in the data, so its width is known only when the flow runs; it compiles to
a `map` region (docs/ir.md), one `compute_statistics` per genre, joined in genre order.
Settings live in a frozen dataclass, as in many training scripts. Runs as plain Python in well
under a second: `python samples/stats_flow.py`.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

import dagc

GENRES = ("comedy", "drama", "horror", "sci-fi")


@dataclass(frozen=True)
class StatsConfig:
    n_movies: int = 400
    seed: int = 11
    min_count: int = 90


CONFIG = StatsConfig()


class MovieStatsFlow:
    """start → genres → compute_statistics (foreach genre found) → join → (flag_sparse if a genre is rare)."""

    @dagc.task(cost="50ms", cpus="500m", memory="256Mi", pure=True)
    @staticmethod
    def start(n_movies: int, seed: int) -> list[dict]:
        rng = random.Random(seed)
        weights = [4, 3, 1, 2]
        return [{"title": f"movie {i}", "genre": rng.choices(GENRES, weights)[0],
                 "gross": round(rng.lognormvariate(3, 1), 2)} for i in range(n_movies)]

    @dagc.task(cost="5ms", pure=True)
    @staticmethod
    def genres(movies: list[dict]) -> list[str]:
        """The genres the data holds (Metaflow: `self.genres = ...; self.next(..., foreach="genres")`)."""
        return sorted({m["genre"] for m in movies})

    @dagc.task(cost="20ms", pure=True)
    @staticmethod
    def compute_statistics(movies: list[dict], genre: str) -> dict:
        gross = sorted(m["gross"] for m in movies if m["genre"] == genre)
        quartiles = statistics.quantiles(gross, n=4) if len(gross) > 1 else [0.0, 0.0, 0.0]
        return {"genre": genre, "count": len(gross), "median": round(quartiles[1], 2),
                "quartiles": [round(q, 2) for q in quartiles]}

    @dagc.task(cost="10ms", pure=True)
    @classmethod
    def join(cls, stats: list[dict]) -> dict:
        by_genre = {s["genre"]: s for s in stats}
        smallest = min(stats, key=lambda s: s["count"])
        return {"by_genre": by_genre, "smallest": smallest["count"], "rarest": smallest["genre"]}

    @dagc.task(cost="10ms", pure=True)
    @staticmethod
    def flag_sparse(summary: dict, min_count: int) -> str:
        return f"{summary['rarest']} has only {summary['smallest']} movies (< {min_count})"

    @dagc.pipeline
    def run(self, min_count: int = CONFIG.min_count):
        movies = self.start(CONFIG.n_movies, CONFIG.seed)
        genres = self.genres(movies)
        # foreach: one step per genre the data holds (a map region; planned for 4)
        stats = [self.compute_statistics(movies, genre) for genre in dagc.each(genres, expected=len(GENRES))]
        summary = self.join(stats)
        if summary["smallest"] < min_count:  # a branch on a step's result: a conditional region
            note = self.flag_sparse(summary, min_count)
        else:
            note = "every genre has enough movies"
        return summary, note, len(stats)


if __name__ == "__main__":
    summary, note, n = MovieStatsFlow().run()
    for genre, s in summary["by_genre"].items():
        print(f"{genre:8s} {s['count']:4d} movies, median gross {s['median']}")
    print(note)
