"""A rank that stops in the middle of asynchronous calls (ARTUNE_TEST_FAULT=stop:rank2:iter3 on the mpi backend):
the others' Work.wait() raises artune.Timeout, a RuntimeError, within the communicator's 3 s timeout, and the job
ends by itself rather than by this driver's safety net (coreutils timeout, 240 s).
Usage: test_python_mpi_fault.py MPIRUN PYTHON test_python_mpi.py"""

import os
import subprocess
import sys

mpirun, python, program = sys.argv[1:4]
env = dict(os.environ, ARTUNE_TEST_FAULT="stop:rank2:iter3")
run = subprocess.run(["timeout", "-s", "KILL", "240", mpirun, "-np", "4", "--oversubscribe", python, program, "fault"],
                     env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
print(run.stdout)
caught = run.stdout.count("caught Timeout (a RuntimeError): mpi backend: no progress for 3 s (a peer stopped or died)")
failures = []
if run.returncode in (0, 137, -9):
    failures.append(f"exit status {run.returncode}: expected the job's own failure, not success or the safety net")
if caught < 1:
    failures.append("no survivor caught artune.Timeout from Work.wait()")
if "no error" in run.stdout:
    failures.append("a rank finished its calls without error")
for f in failures:
    print("FAILED:", f, file=sys.stderr)
sys.exit(1 if failures else 0)
