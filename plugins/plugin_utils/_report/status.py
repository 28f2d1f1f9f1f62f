# Copyright: cvs.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The statuses of a run's results (results.json): what each means to the verdict and to the renderers."""

from __future__ import annotations

STATUSES = ("PASS", "FAIL", "ERROR", "UNREACHABLE", "MISSING")
BAD = ("FAIL", "ERROR", "UNREACHABLE")
