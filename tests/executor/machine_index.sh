#!/bin/sh
# Declares the machine of this MPI rank for the mpi backend, so 2x4 / 4x2
# clusters are exercised on one host: ARTUNE_MACHINE_INDEX = rank / GPUs per machine.
# Usage (under mpirun): ARTUNE_TEST_GPUS_PER_MACHINE=4 sh machine_index.sh PROGRAM ARGS...
per=${ARTUNE_TEST_GPUS_PER_MACHINE:?set ARTUNE_TEST_GPUS_PER_MACHINE}
rank=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:?not started by mpirun}}
ARTUNE_MACHINE_INDEX=$((rank / per))
export ARTUNE_MACHINE_INDEX
exec "$@"
