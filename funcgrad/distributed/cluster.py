"""Where a process learns its place in a multi-process run: the launcher's environment.

``funcgrad.distributed.initialize()`` called without arguments reads the variables of the first
launcher found, in this order:

- funcgrad's own: ``FUNCGRAD_COORDINATOR_ADDRESS`` (host:port), ``FUNCGRAD_NUM_PROCESSES``,
  ``FUNCGRAD_PROCESS_ID``, optionally ``FUNCGRAD_LOCAL_DEVICE_IDS`` (comma-separated);
- torchrun's (and ``python -m funcgrad.distributed.run``'s): ``MASTER_ADDR``, ``MASTER_PORT``,
  ``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``;
- SLURM's (``srun``): ``SLURM_JOB_ID``, ``SLURM_STEP_NODELIST``, ``SLURM_NTASKS``,
  ``SLURM_PROCID``, ``SLURM_LOCALID``; the coordinator is the first node of the step, on a port
  derived from the job id;
- Open MPI's (``mpirun``): ``OMPI_MCA_orte_hnp_uri``, ``OMPI_COMM_WORLD_SIZE``,
  ``OMPI_COMM_WORLD_RANK``, ``OMPI_COMM_WORLD_LOCAL_RANK``; the coordinator is the launcher's
  host, on a port derived from the job id.

Arguments given to ``initialize`` always win over the environment.

Example:
    >>> from funcgrad.distributed import cluster
    >>> cluster.detect({"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500",
    ...                 "WORLD_SIZE": "4", "RANK": "2", "LOCAL_RANK": "0"})
    ClusterSpec(source='torchrun', coordinator_address='10.0.0.1:29500', num_processes=4, process_id=2, local_process_id=0, local_device_ids=None)
"""
import dataclasses
import os
import re

# ports derived from a job id fall in the top 4096 ports, as other launch-aware runtimes do
_PORT_BASE = 65536 - 4096


@dataclasses.dataclass(frozen=True)
class ClusterSpec:
    """What a launcher's environment says about this process (None: not said)."""
    source: str
    coordinator_address: str | None
    num_processes: int | None
    process_id: int | None
    local_process_id: int | None = None
    local_device_ids: tuple | None = None


def _int(env, name, source):
    value = env.get(name)
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"funcgrad.distributed.initialize: the {source} environment variable "
                         f"{name}={value!r} is not an integer") from None


def _funcgrad(env):
    if "FUNCGRAD_COORDINATOR_ADDRESS" not in env:
        return None
    ids = env.get("FUNCGRAD_LOCAL_DEVICE_IDS")
    return ClusterSpec("funcgrad", env["FUNCGRAD_COORDINATOR_ADDRESS"],
                       _int(env, "FUNCGRAD_NUM_PROCESSES", "funcgrad"),
                       _int(env, "FUNCGRAD_PROCESS_ID", "funcgrad"),
                       None,
                       tuple(int(i) for i in ids.split(",")) if ids else None)


def _torchrun(env):
    if "MASTER_ADDR" not in env or "RANK" not in env:
        return None
    address = env["MASTER_ADDR"]
    port = env.get("MASTER_PORT", "29500")
    if ":" in address and not address.startswith("["):   # an IPv6 literal
        address = f"[{address}]"
    return ClusterSpec("torchrun", f"{address}:{port}",
                       _int(env, "WORLD_SIZE", "torchrun"), _int(env, "RANK", "torchrun"),
                       _int(env, "LOCAL_RANK", "torchrun"))


def first_slurm_host(node_list):
    """The first host name of a SLURM node list such as ``node[003-007,012],login1``.

    Example:
        >>> from funcgrad.distributed import cluster
        >>> cluster.first_slurm_host("gpu[017-020,031],cpu4")
        'gpu017'
    """
    match = re.match(r"([^,\[]+)(?:\[([^\],\-]+))?", node_list)
    if match is None:
        raise ValueError(f"funcgrad.distributed.initialize: cannot read a host from "
                         f"SLURM_STEP_NODELIST={node_list!r}")
    return match.group(1) + (match.group(2) or "")


def _slurm(env):
    needed = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID")
    if not all(name in env for name in needed):
        return None
    port = _int(env, "SLURM_JOB_ID", "SLURM") % 4096 + _PORT_BASE
    return ClusterSpec("slurm", f"{first_slurm_host(env['SLURM_STEP_NODELIST'])}:{port}",
                       _int(env, "SLURM_NTASKS", "SLURM"), _int(env, "SLURM_PROCID", "SLURM"),
                       _int(env, "SLURM_LOCALID", "SLURM"))


def _open_mpi(env):
    uri = env.get("OMPI_MCA_orte_hnp_uri")
    if uri is None:
        return None
    # e.g. "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911": the job id, then the launcher's hosts
    host = re.search(r"tcp://([^,:]+)|tcp6://\[([^,\]]+)", uri)
    if host is None:
        raise ValueError(f"funcgrad.distributed.initialize: cannot read the launcher's host from "
                         f"OMPI_MCA_orte_hnp_uri={uri!r}")
    host = host.group(1) or f"[{host.group(2)}]"
    port = int(uri.split(".", 1)[0]) // 4096 % 4096 + _PORT_BASE
    return ClusterSpec("openmpi", f"{host}:{port}",
                       _int(env, "OMPI_COMM_WORLD_SIZE", "Open MPI"),
                       _int(env, "OMPI_COMM_WORLD_RANK", "Open MPI"),
                       _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI"))


DETECTORS = (_funcgrad, _torchrun, _slurm, _open_mpi)


def detect(env=None):
    """The ClusterSpec of the first launcher whose variables are set in ``env`` (default: this
    process's environment), or None when no launcher is found.

    Example:
        >>> from funcgrad.distributed import cluster
        >>> cluster.detect({}) is None
        True
        >>> cluster.detect({"SLURM_JOB_ID": "4242", "SLURM_STEP_NODELIST": "node[07-09]",
        ...                 "SLURM_NTASKS": "3", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"})
        ClusterSpec(source='slurm', coordinator_address='node07:61586', num_processes=3, process_id=1, local_process_id=0, local_device_ids=None)
    """
    env = os.environ if env is None else env
    for detector in DETECTORS:
        spec = detector(env)
        if spec is not None:
            return spec
    return None
