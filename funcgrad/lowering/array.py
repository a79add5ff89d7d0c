"""``funcgrad.Array``: an immutable array held in a PJRT device buffer.

Operations on Arrays dispatch asynchronously; reading a value (``np.asarray``, ``item``,
``repr``, ``float``...) waits for it.
"""
import numpy as np
from jaxlib import _jax
from jaxlib import xla_client as xc

from funcgrad.core import dtypes
from funcgrad.core.avals import ShapedArray
from funcgrad.core.interpreters import Value
from funcgrad.core.values import PYTHON_SCALARS
from funcgrad.lowering import backend
from funcgrad.lowering import transfer_guard as _guard

_REPLICATED = xc.HloSharding.replicate()


class DeviceSharding(_jax.SingleDeviceSharding):
    """The single-device placement the C++ runtime expects with every buffer."""

    def _to_xla_hlo_sharding(self, ndim):
        return _REPLICATED

    @property
    def _device_assignment(self):
        return (self._device,)

    @property
    def device_set(self):
        return {self._device}

    @property
    def memory_kind(self):
        return None

    def is_fully_replicated(self):
        return True

    def is_fully_addressable(self):
        return True

    def devices_indices_map(self, shape):
        return {self._device: (slice(None),) * len(shape)}

    def __repr__(self):
        return f"SingleDeviceSharding(device={self._device!r})"


_shardings = {}


# While the process has a single device, every buffer lives there: dispatch caches then use
# this sharding as their device key instead of asking each buffer (a C++ property call).
sole_sharding = None


def sharding_for(device):
    s = _shardings.get(device)
    if s is None:
        s = _shardings[device] = DeviceSharding(device)
        _update_sole_sharding()
    return s


def _update_sole_sharding():
    global sole_sharding
    if backend.total_device_count() == 1 and len(_shardings) == 1:
        sole_sharding = next(iter(_shardings.values()))
    else:
        sole_sharding = None


backend.client_listeners.append(_update_sole_sharding)


class _BufferAval:
    """What the runtime reads off an aval: shape, dtype and weak_type (float0 stored as bool)."""

    __slots__ = ("shape", "dtype", "weak_type")

    def __init__(self, aval):
        self.shape = aval.shape
        self.dtype = storage_dtype(aval.dtype)
        self.weak_type = aval.weak_type


_OBJECT = np.dtype(object)
_WIDE = frozenset(np.dtype(t) for t in (np.float64, np.int64, np.uint64, np.complex128))


def _host_view(buf):
    """A NumPy view of ``buf``; a buffer in accelerator memory is first copied to the host CPU
    device. (jaxlib's own host-copy method imports ``jax``, which funcgrad never does.)"""
    device = buf._sharding._device
    if device.platform != "cpu":
        host = backend.devices("cpu")[0]
        buf, = _jax.batched_copy_array_to_devices_with_sharding(
            [buf], [_jax.DeviceList((host,))], [sharding_for(host)],
            [_jax.ArrayCopySemantics.ALWAYS_COPY])
    return np.asarray(buf)


def _read_through_bits(array):
    from funcgrad.core import interpreters
    from funcgrad.lax.elementwise import bitcast_convert_type
    dtype = array.aval.dtype
    with interpreters.using(interpreters.root()):
        bits = bitcast_convert_type(array, np.dtype(f"uint{dtype.itemsize * 8}"))
    return _host_view(bits._buf).view(dtype)


def storage_dtype(dtype):
    return dtypes.bool_ if dtype == dtypes.float0 else dtype


class Shard:
    """One device's piece of an Array: ``device``, ``index`` (a tuple of slices into the
    global array), ``data`` (an Array on that device) and ``replica_id`` (0 for the first
    device holding that index, 1 for the next, ... in the sharding's device order)."""

    __slots__ = ("device", "index", "data", "replica_id")

    def __init__(self, device, index, data, replica_id=0):
        self.device, self.index, self.data, self.replica_id = device, index, data, replica_id

    def __repr__(self):
        return (f"Shard(device={self.device!r}, index={self.index}, "
                f"replica_id={self.replica_id}, data={self.data!r})")


class Array(Value):
    """An n-dimensional array on a device (CPU, GPU or TPU), immutable and NumPy-like.

    Example:
        >>> x = funcgrad.numpy.arange(6.0).reshape(2, 3)
        >>> (x * 2).sum(axis=0)
        Array([ 6., 10., 14.], dtype=float32)
    """

    __slots__ = ("aval", "_buf", "__weakref__")

    def __init__(self, aval, buf):
        self.aval = aval
        self._buf = buf

    # --- device and readiness --------------------------------------------------------------
    @property
    def device(self):
        """The device holding this array."""
        return self._buf._sharding._device

    def devices(self):
        return {self.device}

    @property
    def sharding(self):
        return self._buf._sharding

    @property
    def is_fully_replicated(self):
        """True: a single-device Array holds its whole value on its one device (as JAX's)."""
        return True

    @property
    def addressable_shards(self):
        """One ``Shard`` (``device``, ``index``, ``data``): the whole value on its device.

        Example:
            >>> [(s.device.id, s.index, s.data.shape) for s in jnp.ones((2, 3)).addressable_shards]
            [(0, (slice(None, None, None), slice(None, None, None)), (2, 3))]
        """
        return [Shard(self.device, (slice(None),) * len(self.aval.shape), self)]

    @property
    def is_fully_addressable(self):
        """True: this process drives the one device holding the value."""
        return True

    def block_until_ready(self):
        """Wait until the value is computed; returns ``self``."""
        self._buf.block_until_ready()
        return self

    def is_ready(self):
        return self._buf.is_ready()

    def copy_to_host_async(self):
        """Start copying the value to host memory without waiting, so a later read (``np.asarray``,
        ``print``) does not wait for the transfer.

        Example:
            >>> x = jnp.arange(3.0) * 2
            >>> x.copy_to_host_async()
            >>> np.asarray(x)
            array([0., 2., 4.], dtype=float32)
        """
        self._buf._copy_single_device_array_to_host_async()

    def delete(self):
        self._buf.delete()

    def is_deleted(self):
        return self._buf.is_deleted()

    @property
    def nbytes(self):
        return self.size * self.dtype.itemsize

    # --- to host ----------------------------------------------------------------------------
    def _value(self):
        if self._buf.is_deleted():
            raise RuntimeError(f"Array {self.aval.str_short()} was deleted (donated to a jit "
                               f"call or deleted explicitly); its value cannot be read")
        # The buffer protocol gives a read-only view of a CPU buffer (no copy). It cannot
        # express bfloat16 and the float8 types: those are read as same-width unsigned integers
        # (a device bitcast) and viewed as their dtype on the host.
        value = _host_view(self._buf)
        if value.dtype == _OBJECT and self.aval.dtype != _OBJECT:
            value = _read_through_bits(self)
        if self.aval.dtype == dtypes.float0:
            return np.zeros(self.aval.shape, dtypes.float0)
        return value

    def _to_host(self, operation, explicit=False):
        """The value on the host, for ``operation`` (a user-visible device-to-host copy,
        checked by the transfer guard)."""
        if _guard.active[0]:
            _guard.check("device_to_host", explicit,
                         f"{operation} of {self.aval.str_short()} on {self.device}")
        return self._value()

    def __copy__(self):
        return self                 # immutable: a copy could not differ from the original

    def __deepcopy__(self, memo):
        return self

    def __array__(self, dtype=None, copy=None):
        value = self._to_host("np.asarray")
        if dtype is not None and np.dtype(dtype) != value.dtype:
            return value.astype(dtype)
        if copy:
            return value.copy()
        return value

    def _concrete(self, operation=None):
        return self._value()

    def item(self, *index):
        return self._to_host("item()").item(*index)

    def tolist(self):
        return self._to_host("tolist()").tolist()

    def __bool__(self):
        if self.size != 1:
            raise ValueError(f"The truth value of an array with shape {self.shape} is "
                             f"ambiguous: use .any() or .all()")
        return bool(self._to_host("bool()"))

    def __int__(self):
        return int(self._to_host("int()"))

    def __float__(self):
        return float(self._to_host("float()"))

    def __complex__(self):
        return complex(self._to_host("complex()"))

    def __index__(self):
        if not dtypes.is_integer(self.dtype) or self.ndim:
            raise TypeError(f"only integer scalar arrays can be used as an index, got "
                            f"{self.aval.str_short()}")
        return int(self._to_host("__index__"))

    def __hash__(self):
        raise TypeError("unhashable type: 'funcgrad.Array'")

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self._to_host("format()")[()], spec)
        return format(str(self), spec)

    def __str__(self):
        return str(self._to_host("str()"))

    def __repr__(self):
        value = self._value()
        body = np.array2string(value, separator=", ", prefix="Array(")
        weak = ", weak_type=True" if self.aval.weak_type else ""
        # As NumPy: an empty array whose shape the body cannot show names it.
        shape = f", shape={value.shape}" if value.size == 0 and value.shape != (0,) else ""
        return f"Array({body}{shape}, dtype={value.dtype.name}{weak})"

    def __reduce__(self):
        return (_rebuild, (self._value(),))

    # --- DLPack -----------------------------------------------------------------------------
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self.device.platform != "cpu":
            return _jax.buffer_to_dlpack_managed_tensor(self._buf, stream=stream)
        return _jax.buffer_to_dlpack_managed_tensor(self._buf)

    def __dlpack_device__(self):
        platform = self.device.platform
        if platform == "cpu":
            return (1, 0)   # kDLCPU
        if platform in ("cuda", "gpu"):
            return (2, self.device.local_hardware_id)
        raise TypeError(f"__dlpack_device__: no DLPack device type for platform {platform!r}")


def _rebuild(value):
    return device_put(value)


def wrap_buffer(aval, buf):
    return Array(aval, buf)


def _as_numpy(x, dtype=None):
    if isinstance(x, np.ndarray) and (dtype is None or x.dtype == dtype):
        return x
    return np.asarray(x, dtype=dtype)


def device_put(x, device=None):
    """Place ``x`` (NumPy array, Python scalar, Array, or a pytree of them) on ``device``.

    Python scalars stay weakly typed; 64-bit inputs narrow to 32 bits unless x64 is enabled.
    ``device`` may also be a list of devices (replicated on each) or a sharding
    (``funcgrad.sharding.NamedSharding``, ``SingleDeviceSharding``; a bare ``PartitionSpec``
    inside ``with mesh:``).

    Example:
        >>> a = funcgrad.device_put(np.ones(3))
        >>> a.device
        CpuDevice(id=0)
    """
    from funcgrad import tree_util
    if isinstance(device, (list, tuple)) or not isinstance(device, (_jax.Device, type(None))):
        from funcgrad.lowering import sharding   # a list of devices, or a sharding
        return sharding.put_tree(x, device)
    return tree_util.tree_map(lambda leaf: _put_leaf(leaf, device), x)


def _put_leaf(x, device):
    device = device or backend.default_device()
    if isinstance(x, Array):
        if type(x) is not Array:      # a sharded Array: gathered onto the one device
            from funcgrad.lowering import sharding
            return sharding.to_device(x, device)
        if x.device == device:
            return x
        return transfer(x, device, explicit=True)
    if isinstance(x, Value):
        raise TypeError(f"device_put: cannot place a traced value {x.aval.str_short()} on a "
                        f"device inside a transformation")
    return put_numpy(x, device, explicit=True)


def put_numpy(x, device, aval=None, explicit=False):
    """Copy a NumPy value or Python scalar to ``device`` as an Array (an implicit copy for
    the transfer guard unless ``explicit``; None: a copy between devices, checked by the
    caller)."""
    if aval is None:
        if isinstance(x, PYTHON_SCALARS):
            dt, weak = dtypes.python_scalar_dtype(x)
            aval = ShapedArray((), dt, weak)
        else:
            arr = np.asarray(x)
            if arr.dtype == object:
                raise TypeError(f"device_put: cannot convert {type(x).__name__} holding Python "
                                f"objects to an array")
            aval = ShapedArray(arr.shape, dtypes.canonicalize(arr.dtype), False)
    if _guard.active[0] and explicit is not None:
        _guard.check("host_to_device", explicit, f"aval={aval.str_short()}, device={device}")
    host = _as_numpy(x, storage_dtype(aval.dtype))
    if host.dtype in _WIDE:
        with backend.wide_transfers():
            buf = _jax.batched_device_put(_BufferAval(aval), sharding_for(device), [host],
                                          [device], True, False)
    else:
        buf = _jax.batched_device_put(_BufferAval(aval), sharding_for(device), [host], [device],
                                      True, False)
    return Array(aval, buf)


def transfer(x, device, explicit=False):
    """Copy Array ``x`` to another device (an implicit copy for the transfer guard unless
    ``explicit``)."""
    if _guard.active[0]:
        _guard.check("device_to_device", explicit,
                     f"aval={x.aval.str_short()}, from {x.devices()} to {device}")
    return put_numpy(x._value(), device, x.aval, explicit=None)


def fetch(x):
    """``x`` (an Array) as a NumPy array: an explicit device-to-host copy
    (``funcgrad.device_get``)."""
    return np.asarray(x._to_host("device_get", explicit=True))


def from_dlpack(external, device=None):
    """An Array sharing memory with a DLPack-capable object (a NumPy array, a torch tensor...).

    Example:
        >>> a = funcgrad.from_dlpack(np.arange(4.0))
    """
    if device is None:
        # The producer says where its memory lives: (1, 0) is the host, (2, i) CUDA device i.
        kind, index = (external.__dlpack_device__() if hasattr(external, "__dlpack_device__")
                       else (1, 0))
        if kind == 2:
            device = backend.devices("cuda")[index]
        elif kind == 1:
            device = backend.devices("cpu")[0]
        else:
            raise TypeError(f"from_dlpack: unsupported DLPack device type {kind}")
    if device.platform == "cpu":
        # NumPy takes the capsule (zero-copy view); an aligned host buffer is then aliased by
        # the CPU client rather than copied.
        host = np.from_dlpack(external) if hasattr(external, "__dlpack__") else np.asarray(external)
        return put_numpy(host, device, explicit=True)
    capsule = external.__dlpack__() if hasattr(external, "__dlpack__") else external
    buf = _jax.dlpack_managed_tensor_to_buffer(capsule, device, None)
    aval = ShapedArray(buf.shape, np.dtype(buf.dtype), False)
    arr = Array(aval, buf)
    if dtypes.canonicalize(aval.dtype) != aval.dtype:
        return device_put(np.asarray(arr))
    return arr


