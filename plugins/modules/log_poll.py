#!/usr/bin/python
# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: log_poll
short_description: Poll per-node logs of long-running jobs with byte-exact cursors and cross-host completion
version_added: 0.1.0
description:
  - Watches the logs of a long job (training, inference, health tests) on every host of the play, fails fast on
    ordered error patterns and decides completion across hosts under a policy.
  - One task call is one poll round for one host (or the rounds of O(call_seconds)). Poll it with C(until) like
    M(ansible.builtin.async_status); the controller keeps cursors, match history and start time between rounds,
    keyed by playbook run, task and loop item, so two tasks, two loop items or two playbook runs never share state.
  - Cursors are byte offsets advanced only past the last newline seen. A file's identity (device, inode and a hash
    of its first bytes) is checked every round; rotation (rename and recreate) and truncation (copytruncate) are
    detected and reported (RV(events)). The rotated-away file (found by inode and head hash in the same directory)
    or the copy of a truncated one is drained from the old offset first, over several rounds if needed, and followed
    while the new file is still empty; then the cursor restarts at 0 of the new file. After several rotations
    between two rounds, every file rotated since (named like the log, not compressed, last written after the one
    drained) is read too, oldest first. When the file the cursor was on is gone, the bytes it had and that were
    not read yet are reported lost (event C(lost), C(lost_bytes) in RV(log_states) and a warning naming the host, the
    path and the byte count). Bytes are split on newlines before decoding (UTF-8, invalid bytes replaced, a
    trailing carriage return dropped).
  - Completion only counts markers in bytes read by this poll, never a grep of the whole file. With the default
    O(start=auto), a log last written before this C(ansible-playbook) run started is read from its end, so an
    earlier run's marker (or error) cannot complete (or fail) a new run. A log written to during this run before
    the first round (an append-only log the new job already wrote to) is read from byte 0; use O(start=arm)
    before launching such a job to record exact start offsets.
  - Any error on any host stops every host. Hosts outside the completion group keep scanning for errors until the
    group decides. After the group decides, and when another host failed, every host reads to the end of its logs
    and scans what it finds, so its O(save_dir) copy holds every byte there was and an error it shows fails it
    with its own RV(error), the same verdict on every host that shows the error.
  - A host whose log sits on a file system with no space (or no inode) left, and did not grow this round, fails
    at once with C(no space left on device on <host>), naming the path and the file system's free bytes, size and
    free inodes (instead of waiting for O(stall_timeout)); so does a missing or empty O(complete.exit_code_file)
    on a full file system.
  - Each round runs the completion probes on the node before it reads the logs, so whatever the job wrote before its
    exit code, health answer or artifact appeared is scanned in the same round.
  - When a host's last three rounds each came more than the task's C(delay) (and more than 2 s) late, the task warns
    once, naming the host, the interval measured and a delay that fits; a poll never lags silently.
  - A transport failure (unreachable host, timeout, output that is not a reply of the reader) never moves a cursor;
    after O(transport_retries) consecutive failures the host fails, naming itself and the last error.
  - This is an action plugin; the read on the node is a small standard-library Python program run with the
    host's Python interpreter. It works the same over any connection (SSH to a node, SSH into a container).
author:
  - cvs.cluster developers (@cvs-cluster)
options:
  logs:
    description:
      - Logs to poll on this host, in order. Each item is a path or a mapping with C(path) and an optional C(label).
      - The label names the log in results, on the console and in O(save_dir); it defaults to the file's basename
        without a trailing C(.log). Labels and paths must be unique per host; a label cannot contain C(/).
      - A host may have no logs; it then completes only through an exit code, HTTP or artifact probe, or just waits
        for the group. Empty logs on every host with no such probe is an error.
    type: raw
    default: []
  error_patterns:
    description:
      - Ordered mapping of name to regular expression (Python syntax, case-insensitive). Any match on a line not
        matched by O(ignore_error_patterns) fails the poll on every host.
      - When several patterns match in the same round, the first pattern in order wins.
      - A list of regexes or of C({name, pattern}) mappings is accepted too.
    type: raw
    default: {}
  ignore_error_patterns:
    description:
      - Mapping of name to regular expression. A line matching one of these is never an error (a per-line benign
        filter); other lines of the same round are still scanned.
    type: raw
    default: {}
  complete:
    description:
      - How this host's job is recognised as complete, and how the completion group decides. Every configured
        probe must be satisfied for a host to complete.
    type: dict
    default: {}
    suboptions:
      pattern:
        description: Completion marker (regex, case-insensitive) searched in lines read by this poll only.
        type: str
      policy:
        description:
          - C(all) every group host completed; C(any) one did; C(first) (alias C(node0)) the first host of the
            group did; C(last) the last host of the group did.
        type: str
        default: all
        choices: [all, any, first, node0, last]
      hosts:
        description: The completion group, in order. Defaults to the hosts of the play batch.
        type: list
        elements: str
      exit_code_file:
        description:
          - File the job writes its exit code to. Non-zero fails the host with the code; zero completes it, unless
            O(complete.pattern) is set and was not seen, which fails too (the job ended before its marker).
        type: str
      http:
        description: HTTP health probe fetched on the node (directly, proxy variables are ignored); completes when
          the status matches.
        type: dict
        suboptions:
          url:
            description: URL to GET from the node.
            type: str
            required: true
          status:
            description: Expected HTTP status.
            type: int
            default: 200
          timeout:
            description: Seconds to wait for the answer.
            type: float
            default: 5
      artifact:
        description: Result artifact probe; completes when the file exists with at least O(complete.artifact.min_bytes).
        type: dict
        suboptions:
          path:
            description: Path of the artifact on the node.
            type: str
            required: true
          min_bytes:
            description: Minimum size in bytes.
            type: int
            default: 0
  start:
    description:
      - Where a log without a cursor starts. C(auto) (the default; it was C(beginning) in 0.1.0) at
        byte 0, unless the log was last modified before this C(ansible-playbook) run started (it holds nothing of
        this run, event C(stale)), then like C(end). C(beginning) at byte 0 whatever the log holds; C(end) at the
        end of the last complete line present at the first read. A log that does not exist at the first read is
        new, so it is read from its first byte when it appears.
      - C(auto) compares the log's modification time on the node with the run's start on the controller, through
        the node's own clock (no clock sync needed); where the run's start cannot be read (no C(/proc)), it reads
        like C(beginning).
      - C(arm) records the current end of every log and returns at once with RV(cursors); pass them to the polling
        task as O(cursors) so a job launched in between is read from its first new byte. A log missing at arm time
        gets no cursor and is read from its first byte.
      - C(drain) reads every log from its cursor in O(cursors) (a log without one from its first byte) to its end
        now, its last line included even without a newline, appends those bytes to O(save_dir) (so a drain after a
        poll with the same O(save_dir) completes that copy) and returns at once with them in RV(new_lines). Nothing
        decides (no pattern, probe or completion group); a missing log is reported in RV(log_states), and only a
        transport failure fails. It reads at most 16 windows of O(max_bytes) per log; a log not read to its end
        then has C(more) in RV(log_states), is named in C(msg), and a drain from the returned RV(cursors) reads on.
        For what a job wrote after its watch ended, after it was stopped; the returned RV(cursors) are not for a
        later poll (the last one may sit mid-line).
    type: str
    default: auto
    choices: [auto, beginning, end, arm, drain]
  cursors:
    description: Start cursors keyed by path, as returned by a O(start=arm) call.
    type: dict
  timeout:
    description: Seconds since the first round after which a host that has not completed fails as timed out (0 = never);
      the message names each log that never appeared (C(<path> never appeared)), as the stall message does.
    type: float
    default: 3600
  stall_timeout:
    description: Seconds without any new log byte after which a host that has not completed fails as stalled (0 = off).
    type: float
    default: 0
  cmd_timeout:
    description: Bound, in seconds, on each remote read; a read that hangs (for example a FIFO) is cut off and counts
      as a transport failure.
    type: int
    default: 30
  max_bytes:
    description: Most bytes read per log per round. A line longer than this is delivered in pieces.
    type: int
    default: 2097152
  event_budget:
    description:
      - Most bytes one result may weigh, measured as ansible-runner does (the larger of its JSON and its C(str())),
        with room for the keys Ansible adds. ansible-runner and AWX replace a result longer than C(MAX_EVENT_RES)
        (700,000) with C({}) in the job event.
      - Over budget, every status field stays and the newest lines of RV(new_lines) are left out (counted in
        RV(new_lines_truncated)); status strings longer than 2,000 characters are cut if that is not enough.
        Nothing is lost, every line is in O(save_dir) and the C(cvs.cluster.cvs) console prints every line.
      - A budget too small for this task's status fields (its logs, cursors, completion group, events and a capped
        error) fails before any read, naming the minimum. V(0) means no limit.
    type: int
    default: 600000
  call_seconds:
    description:
      - Seconds one call polls before it returns. Above V(0), a call polls round after round (the task's C(delay)
        apart) until the host finished or this time is used, and returns one result for all its rounds
        (RV(rounds_in_call)), so the C(until) loop makes far fewer events; every round applies the same
        deadlines, policies, group coordination and final drain as a call of its own. The wait between two rounds
        of a call ends early when the group decides (another host failed, or the group completed), so this host
        stops at once rather than a C(delay) later.
      - V(0) is one round per call. Unset, it is the value of E(CVS_LOG_POLL_CALL_SECONDS) in the controller's
        environment when that is set, else 120 under ansible-runner/AWX (detected from the environment runner sets,
        such as E(AWX_ISOLATED_DATA_DIR)) and V(0) elsewhere.
      - The C(cvs.cluster.cvs) console shows each round's progress (and, verbose, its lines) between results.
    type: float
  transport_retries:
    description: Consecutive transport failures tolerated before the host fails.
    type: int
    default: 5
  keep_reader:
    description:
      - Keep one reader process on the node for all the rounds of this task, so that a round costs a request and a
        reply over a session already open instead of an ssh exec and a Python start-up on the node.
      - Used with the C(ssh) connection when neither C(become) nor a password is in play; otherwise, and for any
        round where the kept reader does not answer, the round runs a one-shot reader as with V(false). The reader
        ends when the task finishes or its worker exits.
      - Each host then holds one more ssh session on its control master while the task runs (see C(MaxSessions)
        in sshd_config when many inventory aliases share one node).
    type: bool
    default: true
  fleet:
    description:
      - Poll every host of the play batch from this one task (the task must be C(run_once)). Each round sends every
        host's request to the reader kept on that host, waits for the replies together, and decides each host as
        the per-host form would; the group's verdict is acted on by every host in the same call, and the task's
        C(forks) need not cover the hosts. For large fleets, where a task per host costs the controller more per
        round than reading the logs does (see C(docs/scale.md)).
      - The arguments are templated for each host with that host's variables, as in the per-host form.
      - The result is the fleet's (RV(hosts), RV(failed_hosts)); the task itself fails only on bad input, since a
        failed C(run_once) task fails every host. Fail the hosts that failed in a task of their own (see the
        examples). Host entries carry no cursors, so O(start=arm), O(start=drain), O(cursors) and C(become) are
        refused; its O(event_budget) is the whole fleet's.
    type: bool
    default: false
  save_dir:
    description:
      - Controller directory; every delivered line is appended to C(save_dir/<inventory_hostname>/<label>.log).
        After a clean finish that file equals the remote file's complete lines, byte for byte.
    type: path
  state_dir:
    description: Controller directory for the state kept between rounds.
    type: path
    default: ~/.ansible/cvs_log_poll
  state_key:
    description: Overrides the automatic state key (playbook run + task + loop item).
    type: str
  state_retention:
    description:
      - Seconds after which the state of another playbook run that nothing wrote to is removed from O(state_dir),
        at the start of a poll (the state of a finished run is never used again). A run still polling rewrites a
        host state every round, so its state is never removed under it. V(0) keeps everything.
      - Names in O(state_dir) stay below 255 bytes whatever the host names (long ones are hashed).
    type: float
    default: 86400
notes:
  - "Poll with C(until: result.finished), a large C(retries) and the round interval as C(delay). The O(timeout)
    option, not C(retries), bounds the wait."
  - All hosts that poll together must run at once, so C(forks) (and the task's C(throttle)) must be at least the
    play batch size; the task fails before reading anything otherwise.
  - The completion group defaults to the play batch. A batch host that never polls (skipped by C(when)) stops
    holding the group back 30 seconds after the first host started polling; prefer O(logs=[]) over C(when) for
    hosts that should only wait.
  - A rotated file's last line without a newline is not delivered (the writer may still be writing it). Lines of
    a rotated file deleted (or compressed) before the next round are lost and reported as such; keep C(delay) well
    below the rotation period.
  - Each worker of a poll ends within a second when its C(ansible-playbook) goes away (Ansible's workers leave
    its process group, so a SIGKILL of the group, as ansible-runner's and AWX's cancel send, does not reach
    them), and so do its kept readers; a kept reader on a node also ends when its session ends or no request
    came for three delays plus O(cmd_timeout) plus 60 seconds.
  - The stdout callback C(cvs.cluster.cvs) renders poll rounds (progress, heartbeats, verbose log lines).
attributes:
  action:
    support: full
    description: The work is done by the action plugin of the same name, on the controller and through the connection.
  check_mode:
    support: full
    description: Reading logs changes nothing on the nodes; O(save_dir) is still written on the controller.
  diff_mode:
    support: none
    description: Nothing changes, so there is nothing to show as a diff.
  platform:
    support: full
    platforms: posix
    description: Nodes need a POSIX shell, C(timeout) and Python 3.9 or newer.
seealso:
  - module: ansible.builtin.async_status
  - module: ansible.builtin.wait_for
"""

EXAMPLES = r"""
- name: Watch every node's training log from one task (large fleets)
  cvs.cluster.log_poll:
    fleet: true
    logs: ["{{ run_dir }}/training.log"]
    error_patterns: {nan: 'loss:\s*nan'}
    complete: {pattern: 'completed step:\s*99,'}
    save_dir: "{{ cvs_results_dir }}/logs"
  run_once: true
  register: fleet_watch
  until: fleet_watch.finished
  retries: 100000
  delay: 5

- name: Fail the nodes whose logs failed (an error of their own, or stopped by another node's)
  ansible.builtin.fail:
    msg: "{{ fleet_watch.hosts[inventory_hostname].msg | default('failed') }}"
  when: inventory_hostname in fleet_watch.failed_hosts

- name: Wait for training to finish on every node, failing fast on NaN or OOM
  cvs.cluster.log_poll:
    logs: ["{{ run_dir }}/training.log"]
    error_patterns:
      nan: 'loss:\s*nan'
      oom: RESOURCE_EXHAUSTED
    ignore_error_patterns:
      retry: will retry
    complete:
      pattern: 'completed step:\s*99,'
      policy: all
      exit_code_file: "{{ run_dir }}/exit_code"
    timeout: 3600
    stall_timeout: 600
    save_dir: "{{ cvs_results_dir }}/logs"
  register: watch
  until: watch.finished
  retries: 100000
  delay: 5

- name: Arm before launching so stale markers in an append-only log never count
  cvs.cluster.log_poll:
    logs: [/var/log/job.log]
    start: arm
  register: armed

- name: Poll from the armed offsets
  cvs.cluster.log_poll:
    logs: [/var/log/job.log]
    cursors: "{{ armed.cursors }}"
    complete: {pattern: 'job finished'}
  register: watch
  until: watch.finished
  retries: 100000
  delay: 2

- name: Inference topology - servers on every node, benchmark client on the head, done when the head writes its result
  cvs.cluster.log_poll:
    logs:
      - {path: "{{ scratch }}/server.log", label: server}
      - "{{ [{'path': scratch ~ '/client.log', 'label': 'client'}] if cvs_node_index == 0 else [] }}"
    error_patterns: {crash: Traceback}
    complete:
      hosts: "{{ groups['cvs_head'] }}"
      policy: first
      artifact: {path: "{{ scratch }}/result.json", min_bytes: 2}
  register: watch
  until: watch.finished
  retries: 100000
  delay: 5
"""

RETURN = r"""
finished:
  description: True when polling is over for this host (success or failure); the C(until) condition.
  returned: always
  type: bool
completed:
  description: True when this host's own completion probes were satisfied.
  returned: always
  type: bool
failed:
  description: True on an error match, a failed probe, a timeout, a stall, too many transport failures, or when
    another host failed.
  returned: always
  type: bool
new_lines:
  description:
    - Lines delivered this call (its rounds), logs in the order of O(logs), each log's lines in file order.
    - C(log_states[].new_lines) counts each log's share, which labels every line without repeating it; the filter
      P(cvs.cluster.labelled_lines#filter) returns them as C({label, path, line}).
    - Under O(event_budget), the oldest lines of the call; RV(new_lines_truncated) counts those left out.
  returned: always
  type: list
  elements: str
new_lines_truncated:
  description: Lines of this call left out of RV(new_lines) by O(event_budget) (they are in O(save_dir));
    C(log_states[].new_lines_truncated) counts them per log.
  returned: when O(event_budget) left lines out
  type: int
new_lines_truncated_bytes:
  description: Bytes of the lines counted by RV(new_lines_truncated), newlines included.
  returned: when O(event_budget) left lines out
  type: int
rounds_in_call:
  description: Rounds this call polled (see O(call_seconds)).
  returned: except on bad input
  type: int
lines_spooled:
  description: True when the C(cvs.cluster.cvs) console received this call's lines through its spool (it prints
    them from there, not from RV(new_lines)).
  returned: when the console spooled the lines
  type: bool
log_states:
  description:
    - Per log, in the order of O(logs); C(new_lines) counts how many of RV(new_lines) belong to it,
      C(new_lines_truncated) how many O(event_budget) left out.
    - C(state) is C(ok), C(missing), C(directory) or C(unreadable) (with C(error)); C(events) lists what happened
      this round (C(rotated), C(truncated), C(lost), C(stale), C(long_line_split), C(appeared), C(disappeared),
      C(readable)); C(more) is true when O(max_bytes) cut the read short; C(lost_bytes) counts the bytes lost
      this round (at least that many, the file went away with them unread).
  returned: always
  type: list
  elements: dict
  sample: [{path: /tmp/run/training.log, label: training, state: ok, offset: 4096, size: 4100, new_lines: 12,
            events: [rotated], more: false}]
events:
  description: Every log event of this poll so far (the last 100), with the round and the log's label.
  returned: except on bad input
  type: list
  elements: dict
  sample: [{round: 12, label: training, event: rotated}]
lines_total:
  description: Lines delivered on this host since the first round.
  returned: except on bad input
  type: int
last_line:
  description: The last line delivered on this host.
  returned: when finished
  type: str
error:
  description: The error match that failed the run, with the lines before it.
  returned: when an error pattern matched on this host
  type: dict
  sample: {name: nan, pattern: 'loss:\s*nan', line: 'completed step: 5, ... loss: nan', path: /tmp/run/training.log,
           label: training, host: node2, context: ['completed step: 4, ...']}
timed_out:
  description: Whether this host hit O(timeout).
  returned: always
  type: bool
stalled:
  description: Whether this host hit O(stall_timeout).
  returned: always
  type: bool
elapsed:
  description: Seconds since this host's first round.
  returned: always
  type: float
round:
  description: Round number for this host, from 1.
  returned: always
  type: int
group:
  description: The completion group's state.
  returned: always
  type: dict
  sample: {policy: all, hosts: [node1, node2, node3], complete: 2, total: 3, failed: 0, decided: false}
cursors:
  description: Cursor per log path (byte offset and file identity); with O(start=arm), the start cursors to pass on.
  returned: always
  type: dict
transport_error:
  description: The transport failure of this round, if any (cursors did not move).
  returned: always
  type: str
transport_failures:
  description: Consecutive transport failures so far.
  returned: when this round had a transport failure
  type: int
armed:
  description: True for a O(start=arm) call; RV(cursors) holds the start cursors.
  returned: with O(start=arm)
  type: bool
drained:
  description: True for a O(start=drain) call; RV(new_lines) holds what it read and RV(cursors) where it stopped.
  returned: with O(start=drain)
  type: bool
aborted_by:
  description: The host whose failure stopped this one (of a fleet, the host that failed first).
  returned: when another host failed
  type: str
fleet:
  description: True for a fleet's result (O(fleet=true)).
  returned: with O(fleet=true)
  type: bool
hosts:
  description:
    - Each host's result of this call, by inventory name, with the fields of the per-host form but RV(cursors),
      RV(events) and RV(group) (which the fleet holds once). A host appears when it had a round in this call; the
      last result holds every host.
    - When the hosts' status alone outweighs O(event_budget), strings are cut to 240 characters and then entries are
      left out (RV(hosts_left_out)), those of hosts that failed on an error of their own last.
  returned: with O(fleet=true)
  type: dict
failed_hosts:
  description: Every host whose poll failed so far, in the order they failed (own errors and hosts stopped by them).
  returned: with O(fleet=true)
  type: list
  elements: str
error_hosts:
  description: The hosts of RV(failed_hosts) that failed on their own (an error line, a timeout, a transport failure).
  returned: with O(fleet=true)
  type: list
  elements: str
complete_hosts:
  description: How many hosts completed.
  returned: with O(fleet=true)
  type: int
hosts_left_out:
  description: How many host entries RV(hosts) leaves out to stay under O(event_budget).
  returned: with O(fleet=true), when some were left out
  type: int
call_elapsed:
  description: Seconds this call of a fleet took.
  returned: with O(fleet=true)
  type: float
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.cvs.cluster.plugins.module_utils._log_poll_spec import ARGUMENT_SPEC
from ansible_collections.cvs.cluster.plugins.module_utils._log_reader import run_round


def main() -> None:
    # Only reached when the action plugin is bypassed: one raw read round of the logs from their first byte (or
    # their end with start=end/arm), no controller state, no patterns, no completion.
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    logs = module.params["logs"] or []
    logs = [logs] if isinstance(logs, (str, dict)) else logs
    specs = [{"path": x if isinstance(x, str) else x["path"], "offset": None} for x in logs]
    reply = run_round({"logs": specs, "max_bytes": module.params["max_bytes"], "start": module.params["start"]})
    module.exit_json(changed=False, reply=json.loads(json.dumps(reply)))


if __name__ == "__main__":
    main()
