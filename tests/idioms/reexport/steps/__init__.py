from .loader import loader

__all__ = ["loader"]
