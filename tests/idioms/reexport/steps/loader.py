import dagc


@dagc.task
def loader(n: int) -> list:
    return [i * i for i in range(n)]
