# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.cvs.cluster.plugins.filter.log_poll import FilterModule


def test_labelled_lines_filter_labels_each_line_of_a_result() -> None:
    labelled = FilterModule().filters()["labelled_lines"]
    result = {
        "new_lines": ["step 1", "eval 1"],
        "log_states": [
            {"path": "/run/train.log", "label": "train", "new_lines": 1},
            {"path": "/run/eval.log", "label": "eval", "new_lines": 1},
        ],
    }
    assert [x["label"] for x in labelled(result)] == ["train", "eval"]
    assert labelled(result)[1] == {"label": "eval", "path": "/run/eval.log", "line": "eval 1"}


def test_labelled_lines_filter_names_what_it_got_instead_of_a_result() -> None:
    labelled = FilterModule().filters()["labelled_lines"]
    with pytest.raises(AnsibleFilterError, match=r"expects a cvs.cluster.log_poll result .* got list"):
        labelled(["a line"])
