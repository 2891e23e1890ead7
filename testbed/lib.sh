# shellcheck shell=bash
# testbed/lib.sh: shared by testbed/up, testbed/down and testbed/screenshot.
# It is sourced, not executed.
#
# Layout of the test bed folder (TESTBED_DIR, default <repo>/.testbed):
#
#   state.env             KEY=VALUE lines: what runs, where, and how to reach it
#   .sendonce-testbed     marker: down only deletes inside a folder that carries it
#   .lock                 flock(1) lock, so up and down never run at the same time
#   logs/                 xvfb.log openbox.log prosody.log prosodyctl.log gajim.log
#                         (kept by down for post-mortems; wiped by the next fresh up)
#   tls/                  throwaway CA and the localhost certificate
#   openbox/rc.xml        window manager config (maximise Gajim, click to focus)
#   prosody/              prosody.cfg.lua, groups.txt, data/, prosody.pid
#   gajim/config          gajim --config-path (settings.sqlite, shortcuts.json, ...)
#   gajim/home            HOME of the Gajim process (~/.config/gtk-3.0/settings.ini)
#   gajim/runtime         XDG_RUNTIME_DIR of the Gajim process (0700, owned by the user)
#   ws2/                  the second workstation's Gajim (config, home, runtime)
#   psi/                  Psi+ (--app psi-plus): data/ (PSIDATADIR: profiles/default,
#                         certs/), home/, runtime/
#   staging/              0750, group = the Gajim user's: sendonce places snapshots here,
#                         readable by that group alone (0440)
#
# Every process the test bed starts runs in its own session (setsid), so down can
# kill its whole process group, and carries SENDONCE_TESTBED=<TESTBED_DIR> in its
# environment, so down can find stragglers (e.g. D-Bus activated helpers) and
# nothing else.

TB_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TB_REPO=$(cd "$TB_HERE/.." && pwd)

TESTBED_DIR=${TESTBED_DIR:-$TB_REPO/.testbed}
# Absolute, normalised, no whitespace (the state file is plain KEY=VALUE).
TESTBED_DIR=$(realpath -m -- "$TESTBED_DIR")
if [[ $TESTBED_DIR =~ [[:space:]] || $TESTBED_DIR == / ]]; then
    echo "testbed: TESTBED_DIR must be a folder path without whitespace (got '$TESTBED_DIR')" >&2
    exit 2
fi

TB_STATE=$TESTBED_DIR/state.env
TB_MARKER=$TESTBED_DIR/.sendonce-testbed
TB_LOCK=$TESTBED_DIR/.lock
# shellcheck disable=SC2034 # used by the scripts that source this file
TB_LOGS=$TESTBED_DIR/logs
# The subfolders up creates and down removes (logs/ is kept on purpose).
TB_RUNTIME_PARTS=(tls openbox prosody gajim ws2 psi xauth staging state.env converse)

# Prefix for CA files added to the system trust store; down only removes files
# named like this, and only the one recorded in the state file.
TB_CA_DIR=/usr/local/share/ca-certificates
TB_CA_PREFIX=sendonce-testbed-

# Progress goes to stderr, with the seconds since the script started.
tb_log() { printf 'testbed: [%ss] %s\n' "$SECONDS" "$*" >&2; }

tb_die() {
    printf 'testbed: ERROR: %s\n' "$*" >&2
    exit 1
}

tb_require_root() {
    [[ $(id -u) -eq 0 ]] || tb_die "run as root (it installs packages, adds a user and a CA)"
}

# Take the test bed lock on fd 9 (waits up to 120 s for another up/down to finish).
# Children must not inherit fd 9 (start them with 9>&-), or they would hold the lock.
tb_lock() {
    mkdir -p "$TESTBED_DIR"
    exec 9>"$TB_LOCK"
    flock -w 120 9 || tb_die "another testbed/up or testbed/down holds $TB_LOCK"
}

# ---------------------------------------------------------------- state file

# tb_state_set KEY VALUE: add or replace one line of the state file (atomically).
# up records every resource as soon as it exists, so down can undo a half-done up.
tb_state_set() {
    local key=$1 value=$2 tmp
    [[ $value != *$'\n'* ]] || tb_die "state value for $key has a newline"
    tmp=$(mktemp "$TB_STATE.XXXXXX")
    if [[ -f $TB_STATE ]]; then
        grep -v -e "^$key=" "$TB_STATE" >"$tmp" || true
    fi
    printf '%s=%s\n' "$key" "$value" >>"$tmp"
    chmod 0644 "$tmp"
    mv -f "$tmp" "$TB_STATE"
}

# tb_load_state: read state.env into shell variables (only KEY=VALUE lines with
# upper-case keys; nothing is evaluated). Returns 1 when there is no state file.
tb_load_state() {
    [[ -f $TB_STATE ]] || return 1
    local line key
    while IFS= read -r line || [[ -n $line ]]; do
        [[ $line =~ ^([A-Z][A-Z0-9_]*)=(.*)$ ]] || continue
        key=${BASH_REMATCH[1]}
        declare -g "$key=${BASH_REMATCH[2]}"
    done <"$TB_STATE"
    # The display's cookie: every X client of the test bed needs it.
    if [[ -n ${XAUTHORITY:-} ]]; then export XAUTHORITY; fi
    return 0
}

# ---------------------------------------------------------------- processes

# tb_pid_matches PID TEXT: the process is alive (not a zombie) and its command
# line contains TEXT (guards against a recycled PID).
tb_pid_matches() {
    local pid=$1 text=$2 cmd state
    [[ $pid =~ ^[0-9]+$ && -n $text ]] || return 1
    [[ -r /proc/$pid/cmdline ]] || return 1
    state=$(awk '{sub(/.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null) || return 1
    [[ $state != Z ]] || return 1
    cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
    [[ $cmd == *"$text"* ]]
}

# tb_group_pids PGID: PIDs whose process group is PGID.
tb_group_pids() {
    ps -e -o pid=,pgid= | awk -v g="$1" '$2 == g { print $1 }'
}

# tb_marked_pids: PIDs whose environment carries SENDONCE_TESTBED=<TESTBED_DIR>.
tb_marked_pids() {
    local env_file pid
    for env_file in /proc/[0-9]*/environ; do
        pid=${env_file#/proc/}
        pid=${pid%/environ}
        [[ $pid != "$$" ]] || continue
        grep -qzxF -- "SENDONCE_TESTBED=$TESTBED_DIR" "$env_file" 2>/dev/null && echo "$pid"
    done
    return 0
}

# tb_wait_gone SECONDS PID...: wait until none of the PIDs is alive (zombies count as gone).
tb_wait_gone() {
    local deadline=$((SECONDS + $1)) pid alive
    shift
    while :; do
        alive=0
        for pid in "$@"; do
            if [[ -e /proc/$pid ]] && [[ $(awk '{sub(/.*\) /, ""); print $1}' "/proc/$pid/stat" 2>/dev/null) != Z ]]; then
                alive=1
            fi
        done
        ((alive)) || return 0
        ((SECONDS < deadline)) || return 1
        sleep 0.1
    done
}

# tb_stop_group LABEL PGID TEXT: TERM (then KILL after 5 s) the process group
# PGID, but only when one of its members' command line contains TEXT, i.e. it
# is the group the test bed started, not a recycled number.
tb_stop_group() {
    local label=$1 pgid=$2 text=$3 pid ours=0 members
    [[ $pgid =~ ^[0-9]+$ ]] || return 0
    mapfile -t members < <(tb_group_pids "$pgid")
    ((${#members[@]})) || return 0
    for pid in "${members[@]}"; do
        if tb_pid_matches "$pid" "$text"; then ours=1; fi
    done
    if ((!ours)); then
        tb_log "process group $pgid ($label) does not look like ours; left alone"
        return 0
    fi
    tb_log "stopping $label (process group $pgid: ${members[*]})"
    kill -TERM -- "-$pgid" 2>/dev/null || true
    if ! tb_wait_gone 5 "${members[@]}"; then
        tb_log "$label did not stop on TERM; sending KILL"
        kill -KILL -- "-$pgid" 2>/dev/null || true
        tb_wait_gone 3 "${members[@]}" || tb_log "WARNING: $label (group $pgid) still alive"
    fi
}

# ---------------------------------------------------------------- trust store

# tb_remove_ca /usr/local/share/ca-certificates/sendonce-testbed-ID.crt
# Debian's update-ca-certificates, run after a local CA file is deleted, rebuilds
# the bundle (/etc/ssl/certs/ca-certificates.crt) but leaves the CA's symlinks in
# /etc/ssl/certs (ID.pem and its hash link) and does not tell its hooks (e.g. the
# Java keystore of ca-certificates-java) that the CA is gone. So: remove exactly
# our symlinks, rebuild the bundle, then give the hooks the "-" line that
# update-ca-certificates itself gives them for a removed CA.
tb_remove_ca() {
    local crt=$1 name pem link hook removed=0
    name=$(basename "$crt" .crt)
    pem=/etc/ssl/certs/$name.pem
    if [[ ! -e $crt && ! -L $pem ]]; then
        return 0
    fi
    tb_log "removing CA $crt from the system trust store"
    rm -f -- "$crt"
    if [[ -L $pem ]]; then
        for link in /etc/ssl/certs/*; do
            if [[ -L $link && $(readlink "$link") == "$name.pem" ]]; then
                rm -f -- "$link"
            fi
        done
        rm -f -- "$pem"
        removed=1
    fi
    update-ca-certificates >/dev/null 2>&1 || tb_log "WARNING: update-ca-certificates failed"
    if ((removed)) && [[ -d /etc/ca-certificates/update.d ]]; then
        for hook in $(run-parts --test -- /etc/ca-certificates/update.d); do
            printf -- '-%s\n' "$pem" | "$hook" >/dev/null 2>&1 || tb_log "WARNING: trust store hook $hook failed"
        done
    fi
}

# ---------------------------------------------------------------- teardown

# tb_teardown: undo everything recorded in state.env (and what the marker finds).
# Safe to run when nothing runs, when up failed half-way, or twice.
tb_teardown() {
    if ! tb_load_state; then
        # No state: still sweep marked processes (an up killed before writing state).
        :
    fi

    # The Matrix test bed (testbed/up --app nheko) by its own script, which stops what
    # it started and removes its folder.
    if [[ -d $TESTBED_DIR/matrix ]]; then
        MX_DIR=$TESTBED_DIR/matrix "$(dirname "${BASH_SOURCE[0]}")/matrix" down 9>&- || tb_log "WARNING: testbed/matrix down failed"
    fi

    # Psi+ and the second workstation first (each app, its openbox, its Xvfb), then in
    # reverse start order: Gajim, Prosody, openbox, Xvfb.
    tb_stop_group Psi+ "${PSI_PGID:-}" "${PSI_DATA:-/nonexistent-testbed-path}"
    tb_stop_group "Psi+'s openbox" "${PSI_OPENBOX_PGID:-}" "$TESTBED_DIR/openbox/rc.xml"
    tb_stop_group "Psi+'s Xvfb" "${PSI_XVFB_PGID:-}" "Xvfb ${PSI_DISPLAY_NUM:+:$PSI_DISPLAY_NUM}"
    tb_stop_group "second Gajim" "${WS2_GAJIM_PGID:-}" "${WS2_GAJIM_CONFIG:-/nonexistent-testbed-path}"
    tb_stop_group "second openbox" "${WS2_OPENBOX_PGID:-}" "$TESTBED_DIR/openbox/rc.xml"
    tb_stop_group "second Xvfb" "${WS2_XVFB_PGID:-}" "Xvfb ${WS2_DISPLAY_NUM:+:$WS2_DISPLAY_NUM}"
    tb_stop_group gajim "${GAJIM_PGID:-}" "${GAJIM_CONFIG:-/nonexistent-testbed-path}"
    tb_stop_group prosody "${PROSODY_PGID:-}" "${PROSODY_CONFIG:-/nonexistent-testbed-path}"
    tb_stop_group openbox "${OPENBOX_PGID:-}" "$TESTBED_DIR/openbox/rc.xml"
    tb_stop_group Xvfb "${XVFB_PGID:-}" "Xvfb ${DISPLAY_NUM:+:$DISPLAY_NUM}"

    # Stragglers that carry our marker (D-Bus activated helpers, a half-started up).
    local -a left
    mapfile -t left < <(tb_marked_pids)
    if ((${#left[@]})); then
        tb_log "stopping leftover test bed processes: ${left[*]}"
        kill -TERM "${left[@]}" 2>/dev/null || true
        if ! tb_wait_gone 5 "${left[@]}"; then
            kill -KILL "${left[@]}" 2>/dev/null || true
            tb_wait_gone 3 "${left[@]}" || tb_log "WARNING: still alive: ${left[*]}"
        fi
    fi

    # A Xvfb killed with KILL leaves its lock and socket behind: remove them only
    # if the lock names the Xvfb we started.
    local num pid lock pair
    for pair in "${DISPLAY_NUM:-}:${XVFB_PID:-}" "${WS2_DISPLAY_NUM:-}:${WS2_XVFB_PID:-}" "${PSI_DISPLAY_NUM:-}:${PSI_XVFB_PID:-}"; do
        num=${pair%%:*} pid=${pair#*:}
        [[ $num =~ ^[0-9]+$ && $pid =~ ^[0-9]+$ ]] || continue
        lock=/tmp/.X$num-lock
        if [[ -f $lock ]] && [[ $(tr -d ' \n' <"$lock") == "$pid" ]] && [[ ! -e /proc/$pid ]]; then
            rm -f -- "$lock" "/tmp/.X11-unix/X$num"
        fi
    done

    # The CA we added to the system trust store (only a file named like ours).
    if [[ -n ${CA_CERT_INSTALLED:-} ]]; then
        case $CA_CERT_INSTALLED in
        "$TB_CA_DIR/$TB_CA_PREFIX"*.crt) tb_remove_ca "$CA_CERT_INSTALLED" ;;
        *) tb_log "WARNING: CA_CERT_INSTALLED=$CA_CERT_INSTALLED is not a test bed path; left alone" ;;
        esac
    fi

    # Runtime files: only inside a folder that up marked as a test bed.
    if [[ -f $TB_MARKER ]]; then
        local part
        for part in "${TB_RUNTIME_PARTS[@]}"; do
            rm -rf -- "${TESTBED_DIR:?}/$part"
        done
    fi
}
