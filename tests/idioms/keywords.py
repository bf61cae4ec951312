"""Task parameters named like the runtime's own (`name`, `fn`, `spec`, `owner`, `key_values`), passed by
keyword."""

import dagc


@dagc.task
def greet(name: str, fn: str = "!") -> str:
    return "hello " + name + fn


@dagc.task
def shout(text: str, spec: str, owner: str, key_values: tuple = ()) -> str:
    return f"{text.upper()} {spec} {owner} {key_values}"


@dagc.pipeline
def main() -> list:
    hello = greet(name="dagc", fn="?")
    return [hello, shout(text=hello, spec="s", owner="o", key_values=("k", 1))]
