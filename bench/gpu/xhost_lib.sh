# Shared by bench/gpu/run_xhost_2gpu.sh and run_xhost_ngpu.sh (sourced): Ansible from the carried wheels, and
# the GPUs' link speed the xhost play judges against. Reads PY, REPO, BACKEND, LOG, WHEELS, SKIP_INSTALL,
# ANSIBLE_PLAYBOOK, LINK_GBPS; sets PYTHONPATH, PLAYBOOK, LINK_GBPS.

# shellcheck source=bench/gpu/lib.sh
source "$REPO/bench/gpu/lib.sh"
install_ansible() {  # Ansible (and its dependencies) from the wheels (lib.sh's carry_ansible), unless SKIP_INSTALL
    if [ -z "${SKIP_INSTALL:-}" ]; then
        carry_ansible || exit 3
    fi
    PLAYBOOK=${ANSIBLE_PLAYBOOK:-$PY /tmp/site/bin/ansible-playbook}
}

read_link_speed() {  # with NCCL: the GPUs into the log, and GPU 0's NVLink speed per direction in Gb/s
    [ "$BACKEND" = nccl ] || return 0
    { nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv; nvidia-smi topo -m;
      nvidia-smi nvlink -s -i 0; } >> "$LOG" 2>&1
    "$PY" -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())' >> "$LOG" 2>&1
    # The sum of GPU 0's active links.
    local nvlink
    nvlink=$(nvidia-smi nvlink -s -i 0 | awk '/GB\/s/ {for (i = 1; i <= NF; i++) if ($i == "GB/s") s += $(i-1)}
                                             END {if (s > 0) printf "%.1f", s * 8}')
    LINK_GBPS=${LINK_GBPS:-${nvlink:-}}
}
