"""Collation: turning a list of items into one batch of stacked NumPy arrays.

``default_collate`` walks the structure of the first item and stacks leaf by leaf:
NumPy arrays and scalars are stacked along a new axis 0; Python ``bool``/``int``/``float``/
``complex`` become arrays of ``bool``/``int64``/``float64``/``complex128``; dicts (any Mapping),
namedtuples, dataclasses, tuples and lists keep their type with each field collated; strings,
bytes and ``None`` are gathered into a list.

Example:
    >>> from funcgrad.data import default_collate
    >>> import numpy as np
    >>> batch = default_collate([{"x": np.zeros(2), "y": 1}, {"x": np.ones(2), "y": 0}])
    >>> batch["x"].shape, batch["y"].tolist()
    ((2, 2), [1, 0])
"""
import collections.abc
import dataclasses
import numbers

import numpy as np

__all__ = ["default_collate", "default_convert"]

_IN_WORKER = False   # set by the worker loop: device arrays are refused there


def _is_device_array(x):
    mod = type(x).__module__ or ""
    return (mod == "funcgrad" or mod.startswith("funcgrad.")) and hasattr(x, "__array__")


def _device_to_numpy(x, path):
    if _IN_WORKER:
        raise TypeError(f"default_collate: the item at {path} is a {type(x).__module__}."
                        f"{type(x).__name__} inside a DataLoader worker; workers must not touch "
                        f"funcgrad device arrays (they would start a second XLA runtime). Return "
                        f"NumPy arrays from the dataset (numpy.asarray(x) once, up front)")
    return np.asarray(x)


def _keys(keys):
    return "[" + ", ".join(sorted(repr(k) for k in keys)) + "]"


def _at(path):
    return "" if path == "batch" else f" at {path}"


def _path(path, key):
    return f"{path}[{key!r}]"


def _collate(batch, path):
    elem = batch[0]
    elem_type = type(elem)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OUSV":
            return list(batch)
        try:
            return np.stack(batch)
        except ValueError:
            shapes = sorted({tuple(np.shape(b)) for b in batch})
            raise ValueError(f"default_collate: cannot stack the arrays at {path}: items have "
                             f"different shapes {shapes[:6]}; pad or resize them to one shape, "
                             f"or pass a collate_fn") from None
        except TypeError:
            types = sorted({type(b).__name__ for b in batch})
            raise TypeError(f"default_collate: the items at {path} mix types {types}; "
                            f"every item must have the same structure") from None
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "OUSV":
            return list(batch)
        return np.array(batch, dtype=elem.dtype)
    if isinstance(elem, bool):
        return np.array(batch, dtype=np.bool_)
    if isinstance(elem, numbers.Integral):
        return np.array(batch, dtype=np.int64)
    if isinstance(elem, numbers.Real):
        return np.array(batch, dtype=np.float64)
    if isinstance(elem, numbers.Complex):
        return np.array(batch, dtype=np.complex128)
    if isinstance(elem, (str, bytes)) or elem is None:
        return list(batch)
    if _is_device_array(elem):
        return _collate([_device_to_numpy(b, path) for b in batch], path)
    if isinstance(elem, collections.abc.Mapping):
        keys = list(elem.keys())
        for k, b in enumerate(batch):
            if not isinstance(b, collections.abc.Mapping) or b.keys() != elem.keys():
                got = _keys(b.keys()) if isinstance(b, collections.abc.Mapping) \
                    else f"none (it is a {type(b).__name__})"
                raise ValueError(f"default_collate: item {k} of the batch{_at(path)} has keys "
                                 f"{got}, but item 0 has keys {_keys(keys)}")
        out = {key: _collate([b[key] for b in batch], _path(path, key)) for key in keys}
        if elem_type is dict:
            return out
        try:
            return elem_type(out)
        except TypeError:
            return out
    if dataclasses.is_dataclass(elem) and not isinstance(elem, type):
        fields = [f.name for f in dataclasses.fields(elem) if f.init]
        return elem_type(**{name: _collate([getattr(b, name) for b in batch],
                                           f"{path}.{name}") for name in fields})
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):        # namedtuple
        _check_lengths(batch, path)
        return elem_type(*(_collate(list(col), _path(path, k))
                           for k, col in enumerate(zip(*batch))))
    if isinstance(elem, collections.abc.Sequence):
        _check_lengths(batch, path)
        cols = [_collate(list(col), _path(path, k)) for k, col in enumerate(zip(*batch))]
        if isinstance(elem, tuple):
            return tuple(cols) if elem_type is tuple else _rebuild(elem_type, cols, tuple)
        return cols if elem_type is list else _rebuild(elem_type, cols, list)
    if hasattr(elem, "__array__"):
        return _collate([np.asarray(b) for b in batch], path)
    raise TypeError(f"default_collate: cannot collate the items at {path} of type "
                    f"{elem_type.__module__}.{elem_type.__qualname__}; supported are NumPy "
                    f"arrays and scalars, numbers, str/bytes/None, and dicts, tuples, lists, "
                    f"namedtuples and dataclasses of these. Pass a collate_fn for other types")


def _rebuild(elem_type, cols, fallback):
    try:
        return elem_type(cols)
    except TypeError:
        return fallback(cols)


def _check_lengths(batch, path):
    n = len(batch[0])
    for k, b in enumerate(batch):
        if len(b) != n:
            raise ValueError(f"default_collate: item {k} of the batch{_at(path)} has {len(b)} "
                             f"fields, but item 0 has {n}; every item must have the same "
                             f"structure")


def default_collate(batch):
    """Stack a list of items (nested dicts/tuples/lists/namedtuples of numbers and arrays).

    The result has the structure of one item with every leaf replaced by the stacked leaves
    (a new leading axis of length ``len(batch)``). Errors say where in the structure the
    items disagree.

    Example:
        >>> from funcgrad.data import default_collate
        >>> import numpy as np
        >>> x, y = default_collate([(np.array([1, 2]), 0), (np.array([3, 4]), 1)])
        >>> x.tolist(), y.tolist()
        ([[1, 2], [3, 4]], [0, 1])
    """
    if not isinstance(batch, collections.abc.Sequence) or isinstance(batch, (str, bytes)):
        raise TypeError(f"default_collate: expects a list of items, got "
                        f"{type(batch).__name__}")
    if len(batch) == 0:
        raise ValueError("default_collate: cannot collate an empty batch (no items)")
    return _collate(list(batch), "batch")


def default_convert(data):
    """Convert one unbatched item for ``batch_size=None`` loading: device arrays become NumPy,
    everything else (nested containers included) is returned with the same structure.

    Example:
        >>> from funcgrad.data import default_convert
        >>> import numpy as np
        >>> default_convert({"x": np.ones(2), "y": [1, 2]})["y"]
        [1, 2]
    """
    if isinstance(data, (np.ndarray, np.generic, str, bytes, numbers.Number)) or data is None:
        return data
    if _is_device_array(data):
        return _device_to_numpy(data, "item")
    if isinstance(data, collections.abc.Mapping):
        out = {k: default_convert(v) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:
            return out
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(v) for v in data))
    if isinstance(data, (tuple, list)):
        out = [default_convert(v) for v in data]
        return type(data)(out) if type(data) in (tuple, list) else _rebuild(type(data), out, list)
    return data
