"""A Prefect 3 map-reduce flow written with the call forms of Prefect's "Run work concurrently" guide
(docs/v3/how-to-guides/workflows/run-work-concurrently.mdx): `.map()` over a task's result with `unmapped`
and non-iterable arguments given whole, `wait()` on the mapped futures, `.submit()` in a comprehension, a
future passed on to the next task, `[f.result() for f in futures]`, and `wait_for=` for an order without data.

Kept as Prefect users write it; nothing changed but the text, which is a module constant.
"""

from prefect import flow, task, unmapped
from prefect.futures import wait

TEXT = """It was the best of times, it was the worst of times, it was the age of wisdom, it was the age of
foolishness, it was the epoch of belief, it was the epoch of incredulity, it was the season of Light, it was
the season of Darkness, it was the spring of hope, it was the winter of despair"""


@task
def split_text(text: str, n_chunks: int) -> list[str]:
    words = text.split()
    size = -(-len(words) // n_chunks)
    return [" ".join(words[i:i + size]) for i in range(0, len(words), size)]


@task(retries=2, timeout_seconds=60)
def count_words(chunk: str, lowercase: bool, stopwords: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for word in chunk.split():
        word = word.strip(",.").lower() if lowercase else word.strip(",.")
        if word not in stopwords:
            counts[word] = counts.get(word, 0) + 1
    return counts


@task
def merge_counts(counts: list[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for part in counts:
        for word, n in part.items():
            total[word] = total.get(word, 0) + n
    return dict(sorted(total.items()))


@task
def top_words(counts: dict[str, int], k: int) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:k]


@task
def describe(counts: dict[str, int]) -> str:
    print(f"{len(counts)} distinct words")
    return f"{sum(counts.values())} words, {len(counts)} distinct"


@flow
def word_count(text: str = TEXT, n_chunks: int = 4):
    chunks = split_text(text, n_chunks)
    counts = count_words.map(chunks, True, stopwords=unmapped(["it", "was", "the", "of"]))
    wait(counts)
    merged = merge_counts.submit(counts)
    futures = [top_words.submit(merged, k) for k in (1, 3, 5)]
    tops = [f.result() for f in futures]
    summary = describe(merged, wait_for=futures)
    return merged.result(), tops, summary


if __name__ == "__main__":
    print(word_count())
