"""attnlab: a Python client for the attnlab service (attnlabd's REST API).

Standard library only; NumPy and pandas are used when they are installed (arrays and DataFrames).

    from attnlab import Client
    c = Client("http://127.0.0.1:8080", token=None)
    run = c.create_run({"corpus": "default", "attention": "cosine_rope", "steps": 200})
    c.wait(run["id"], progress=True)
    c.metrics(run["id"], keys=["loss", "val_loss"])
"""
from .client import ApiError, Client, DEFAULT_URL
from .logging import RunLogger

__all__ = ["Client", "ApiError", "RunLogger", "DEFAULT_URL"]
__version__ = "0.1.0"
