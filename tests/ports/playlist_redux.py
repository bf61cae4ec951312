"""Metaflow's tutorial `03-playlist-redux/playlist.py` (Netflix/metaflow), ported to dagc.

Kept as the tutorial writes it: a class of steps; `import random` inside `bonus_movie` and `from random
import shuffle` inside `genre_movies` (draws from the global generator, as the tutorial's do); the two
recommendation branches after `start` and their `join`. Changed: the steps take their inputs and return
their outputs instead of keeping artifacts on `self`; `start` computes the genre statistics from a small
built-in table instead of reading the latest MovieStatsFlow run; the module seeds the generator so that
two runs can be compared (the tutorial does not seed).
"""

import random
import statistics

import dagc

random.seed(2024)

MOVIES = [
    ("Alien", "Horror|Sci-Fi", 80.9), ("Blade Runner", "Sci-Fi|Thriller", 32.8), ("Arrival", "Drama|Sci-Fi", 100.5),
    ("Heat", "Crime|Drama", 67.4), ("Up", "Animation|Comedy", 293.0), ("Her", "Drama|Romance|Sci-Fi", 25.6),
    ("Jaws", "Thriller", 260.0), ("Dune", "Sci-Fi|Adventure", 108.3), ("Clue", "Comedy|Crime", 14.6),
    ("Moon", "Drama|Sci-Fi", 5.0), ("Rocky", "Drama|Sport", 117.2), ("Gravity", "Drama|Sci-Fi", 274.1),
    ("Big", "Comedy|Drama", 114.9), ("Tron", "Action|Sci-Fi", 33.0), ("Seven", "Crime|Thriller", 100.1),
]


class PlayListFlow:
    @dagc.task(cost="50ms")
    @staticmethod
    def start() -> dict:
        """The genre statistics (the tutorial loads them from the latest MovieStatsFlow run)."""
        genre_stats = {}
        for genre in sorted({g.lower() for _, gs, _ in MOVIES for g in gs.split("|")}):
            rows = [m for m in MOVIES if genre in m[1].lower()]
            gross = sorted(m[2] for m in rows)
            quartiles = statistics.quantiles(gross, n=4) if len(gross) > 1 else [gross[0]] * 3
            genre_stats[genre] = {"dataframe": {"movie_title": [m[0] for m in rows], "genres": [m[1] for m in rows],
                                                "gross": [m[2] for m in rows]}, "quartiles": quartiles}
        return genre_stats

    @dagc.task(cost="20ms")
    @staticmethod
    def bonus_movie(genre_stats: dict, genre: str) -> tuple:
        """This step chooses a random title for a different movie genre."""
        import random

        # Concatenate all the genre-specific data frames.
        df = {"movie_title": [], "genres": []}
        for other, data in genre_stats.items():
            if other != genre.lower():
                for row_idx in range(len(data["dataframe"]["movie_title"])):
                    if genre.lower() not in data["dataframe"]["genres"][row_idx].lower():
                        df["movie_title"].append(data["dataframe"]["movie_title"][row_idx])
                        df["genres"].append(data["dataframe"]["genres"][row_idx])

        # Choose a random movie.
        random_index = random.randint(0, len(df["genres"]) - 1)
        return df["movie_title"][random_index], df["genres"][random_index]

    @dagc.task(cost="20ms")
    @staticmethod
    def genre_movies(genre_stats: dict, genre: str) -> list:
        """Select the top performing movies from the user specified genre."""
        from random import shuffle

        genre = genre.lower()
        if genre not in genre_stats:
            movies = []
        else:
            df = genre_stats[genre]["dataframe"]
            quartiles = genre_stats[genre]["quartiles"]
            movies = [df["movie_title"][i] for i, g in enumerate(df["gross"]) if g >= quartiles[0]]

        # Shuffle the playlist.
        shuffle(movies)
        return movies

    @dagc.task(cost="5ms")
    @staticmethod
    def join(movies: list, bonus: tuple, recommendations: int) -> dict:
        return {"playlist": movies[:recommendations], "bonus": bonus}

    @dagc.pipeline
    def run(self, genre: str = "Sci-Fi", recommendations: int = 5):
        genre_stats = self.start()
        bonus = self.bonus_movie(genre_stats, genre)
        movies = self.genre_movies(genre_stats, genre)
        return self.join(movies, bonus, recommendations)


if __name__ == "__main__":
    print(PlayListFlow().run())
