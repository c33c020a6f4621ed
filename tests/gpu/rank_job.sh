#!/bin/sh
# One rank of a multi-rank GPU check (run by torchrun --no-python): the rank named by TG_BAD_RANK launches the
# FA4-shaped kernel with a seqlen-contiguous dK, every other rank a healthy one. Usage: rank_job.sh FA4_GPU_EXE
if [ "${RANK:-}" = "${TG_BAD_RANK:-none}" ]; then
  sleep 3  # let the healthy ranks finish first: torchrun stops the others once one fails
  exec "$1" chevron encode dk_bad
fi
exec "$1" chevron encode ok
