# Shared by the bench/gpu/run_*.sh scripts (sourced): the device machine has no network, so Ansible comes from
# the wheels carried with the working tree (WHEELS, default .whl) into /tmp/site. Reads PY, REPO, WHEELS.
carry_ansible() {  # Ansible into /tmp/site, on PYTHONPATH, with this checkout's ansible.cfg and temp dirs in /tmp
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "${WHEELS:-$REPO/.whl}"/*.whl || return 3
    export PYTHONPATH=/tmp/site ANSIBLE_CONFIG=$REPO/ansible.cfg
    export ANSIBLE_LOCAL_TEMP=/tmp/ansible-local ANSIBLE_REMOTE_TEMP=/tmp/ansible-remote
}
