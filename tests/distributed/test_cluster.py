"""Reading a launcher's environment (no processes started)."""
import pytest

from funcgrad.distributed import cluster


def test_nothing_set():
    assert cluster.detect({"PATH": "/bin"}) is None


def test_funcgrad_variables_win_over_torchrun():
    spec = cluster.detect({"FUNCGRAD_COORDINATOR_ADDRESS": "h:1234", "FUNCGRAD_NUM_PROCESSES": "3",
                           "FUNCGRAD_PROCESS_ID": "2", "FUNCGRAD_LOCAL_DEVICE_IDS": "0,1",
                           "MASTER_ADDR": "other", "RANK": "0", "WORLD_SIZE": "9"})
    assert spec == cluster.ClusterSpec("funcgrad", "h:1234", 3, 2, None, (0, 1))


def test_torchrun():
    spec = cluster.detect({"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29400", "RANK": "5",
                           "WORLD_SIZE": "8", "LOCAL_RANK": "1"})
    assert spec == cluster.ClusterSpec("torchrun", "10.1.2.3:29400", 8, 5, 1)


def test_torchrun_ipv6_and_default_port():
    spec = cluster.detect({"MASTER_ADDR": "fe80::1", "RANK": "0", "WORLD_SIZE": "2"})
    assert spec.coordinator_address == "[fe80::1]:29500"


@pytest.mark.parametrize("nodes, host", [
    ("node001", "node001"), ("node001,host2", "node001"), ("node[003-015],host2", "node003"),
    ("gpu[017,019-020]", "gpu017"), ("a-b[9]", "a-b9")])
def test_slurm_first_host(nodes, host):
    assert cluster.first_slurm_host(nodes) == host


def test_slurm():
    spec = cluster.detect({"SLURM_JOB_ID": "8195", "SLURM_STEP_NODELIST": "c[10-11]",
                           "SLURM_NTASKS": "4", "SLURM_PROCID": "3", "SLURM_LOCALID": "1"})
    # the port is derived from the job id so that every task computes the same one
    assert spec == cluster.ClusterSpec("slurm", f"c10:{8195 % 4096 + 61440}", 4, 3, 1)


def test_open_mpi():
    spec = cluster.detect({"OMPI_MCA_orte_hnp_uri": "1531576320.0;tcp://10.96.0.1,10.148.0.1:34911",
                           "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1",
                           "OMPI_COMM_WORLD_LOCAL_RANK": "1"})
    assert spec == cluster.ClusterSpec("openmpi", f"10.96.0.1:{1531576320 // 4096 % 4096 + 61440}",
                                       2, 1, 1)
    ipv6 = cluster.detect({"OMPI_MCA_orte_hnp_uri": "1314521088.0;tcp6://[fe80::b9b,2620::2]:4337",
                           "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"})
    assert ipv6.coordinator_address.startswith("[fe80::b9b]:")


def test_bad_integer_names_the_variable():
    with pytest.raises(ValueError, match="torchrun environment variable RANK='two'"):
        cluster.detect({"MASTER_ADDR": "h", "RANK": "two"})
