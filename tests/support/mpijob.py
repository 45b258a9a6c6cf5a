"""Helpers of the Python test drivers that run MPI jobs as children (tests/apps, tests/bindings)."""
import os
import subprocess
import sys
import time


def run(cmd, what, env=None, timeout=300):
    """Runs `cmd` (stdout and stderr together, `env` added to the environment); exits with FAIL and the
    output when it fails; returns the output."""
    t = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       env=dict(os.environ, **(env or {})))
    print(f"[{time.time() - t:5.1f} s] {what}: {' '.join(cmd[3:])}")
    if p.returncode != 0:
        print(p.stdout)
        sys.exit(f"FAIL: {what} exited with {p.returncode}")
    return p.stdout


def check(cond, msg):
    print(("ok:   " if cond else "FAIL: ") + msg)
    return cond


def kill_session(job, shm_before=None):
    """SIGKILLs the session of `job` (a Popen started with start_new_session=True): Open MPI puts every
    rank in a process group of its own, so mpiexec and all ranks go. Waits until none is left; then
    removes the Open MPI shared-memory segments the killed job left (remove_stale_shm)."""
    subprocess.run(["pkill", "-KILL", "-s", str(job.pid)])
    try:
        job.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    while subprocess.run(["pgrep", "-s", str(job.pid)], stdout=subprocess.DEVNULL).returncode == 0:
        time.sleep(0.05)
    if shm_before is not None:
        remove_stale_shm(shm_before)


STALE_PREFIXES = ("vader_segment", "sm_segment", "sem.OMPIO_")


def remove_stale_shm(shm_before):
    """Removes the Open MPI shared-memory segments (vader_segment.*, sm_segment.*) and OMPIO's named
    semaphores (sem.OMPIO_*: a file's shared file pointer with the mpiio and hdf5 transports) that
    appeared in /dev/shm since `shm_before` (shm_names() taken earlier) and that no live process maps
    any more: a job killed with SIGKILL never unlinks its own. Those of jobs still running (another
    test under ctest -j) are mapped by their ranks and stay."""
    if not os.path.isdir("/dev/shm"):
        return
    new = [n for n in set(os.listdir("/dev/shm")) - shm_before if n.startswith(STALE_PREFIXES)]
    if not new:
        return
    mapped = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    if "/dev/shm/" in line:
                        mapped.add(line.rsplit("/", 1)[-1].strip())
        except OSError:
            pass  # gone, or not ours to read
    for name in new:
        if name not in mapped:
            try:
                os.unlink(os.path.join("/dev/shm", name))
            except OSError:
                pass


def shm_names():
    """The names in /dev/shm now (for kill_session)."""
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def committed_steps(d):
    """Steps of the committed checkpoints (ckpt.<step> directories) in `d`."""
    if not os.path.isdir(d):
        return []
    return [int(x.split(".")[1]) for x in os.listdir(d) if x.startswith("ckpt.") and x[5:].isdigit()]


def wait_committed(job, d, at_least, timeout=120):
    """Polls `d` until a checkpoint of step >= at_least is committed; exits with FAIL when `job` ends
    first. Returns the newest committed step."""
    deadline = time.time() + timeout
    while time.time() < deadline and job.poll() is None:
        steps = committed_steps(d)
        if steps and max(steps) >= at_least:
            return max(steps)
        time.sleep(0.01)
    sys.exit("FAIL: the job ended (or timed out) before it could be killed; use more steps")
