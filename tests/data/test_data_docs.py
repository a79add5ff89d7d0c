"""Every public name of funcgrad.data has a docstring with an example, and the examples run."""
import doctest
import importlib
import inspect

import pytest

import funcgrad.data
from funcgrad.data import datasets, transforms

MODULES = ["funcgrad.data", "funcgrad.data.dataset", "funcgrad.data.sampler",
           "funcgrad.data.collate", "funcgrad.data.dataloader", "funcgrad.data._worker",
           "funcgrad.data._pool", "funcgrad.data.transforms", "funcgrad.data.datasets",
           "funcgrad.data.progress", "funcgrad.data.prefetch"]


def _public():
    for mod in (funcgrad.data, datasets, transforms):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if inspect.ismodule(obj):
                continue
            yield f"{mod.__name__}.{name}", obj


@pytest.mark.parametrize("name,obj", list(_public()), ids=lambda v: v if isinstance(v, str) else "")
def test_public_names_have_an_example(name, obj):
    doc = inspect.getdoc(obj) or ""
    assert ">>>" in doc, f"{name} has no example in its docstring"
    if inspect.isclass(obj):
        for meth_name, meth in vars(obj).items():
            if meth_name.startswith("_") or not callable(meth):
                continue
            assert inspect.getdoc(meth), f"{name}.{meth_name} has no docstring"


def _device_put_available():
    try:
        import funcgrad as fg
    except ImportError:
        return False
    return hasattr(fg, "device_put")


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples_run(module_name):
    if module_name.endswith("prefetch") and not _device_put_available():
        pytest.skip("funcgrad.device_put is not available yet")
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {module_name}"
