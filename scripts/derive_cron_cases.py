"""Derive tests/fixtures/cron/cases.json: what robfig/cron's ParseStandard answers for CronJob schedules.

program/config/cron.py reads a CronJob's ``schedule`` as the API server does: robfig/cron v3's ``ParseStandard``
(kubernetes pkg/apis/batch/validation ``validateScheduleFormat``; Kubernetes vendors v3.0.1) and no ``TZ`` in it.
This script asks the Go original about every schedule in ``CASES`` (the fields' edges, ``strconv.Atoi``'s signs,
names, descriptors and ``@every`` with Go durations) and records accepted or the error.

Usage (Go 1.19 or newer; no network)::

    git clone https://github.com/robfig/cron && git -C cron checkout v3.0.1
    python scripts/derive_cron_cases.py cron

The fixture records the commit it came from; tests/test_cron.py holds program/config/cron.py to every answer.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from go_original import checkout_version, go_run, go_version

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "cron" / "cases.json"

GO_MAIN = r'''package main

import (
	"encoding/json"
	"os"

	"github.com/robfig/cron/v3"
)

type answer struct {
	Schedule string `json:"schedule"`
	Error    string `json:"error,omitempty"`
}

func main() {
	var schedules []string
	if err := json.NewDecoder(os.Stdin).Decode(&schedules); err != nil {
		panic(err)
	}
	answers := []answer{}
	for _, s := range schedules {
		a := answer{Schedule: s}
		if _, err := cron.ParseStandard(s); err != nil {
			a.Error = err.Error()
		}
		answers = append(answers, a)
	}
	out := json.NewEncoder(os.Stdout)
	out.SetEscapeHTML(false)
	out.SetIndent("", " ")
	if err := out.Encode(answers); err != nil {
		panic(err)
	}
}
'''

FIELDS = [
    # numbers as strconv.Atoi reads them
    "0 2 * * *", "+1 2 * * *", "0 +2 * * *", "-1 2 * * *", "00 02 * * *", "1_0 2 * * *", "\u0663 2 * * *",
    " 1 2 * * *", "0 2 * * +0", "+ 2 * * *", "0x1 2 * * *", "9223372036854775808 2 * * *",
    # bounds of each field
    "59 23 31 12 6", "60 2 * * *", "0 24 * * *", "0 2 0 * *", "0 2 32 * *", "0 2 * 0 *", "0 2 * 13 *", "0 2 * * 7",
    # ranges and steps
    "*/15 * * * *", "*/0 * * * *", "5/10 * * * *", "0-59/+5 * * * *", "*/-5 * * * *", "0 5-2 * * *", "0 2-2 * * *",
    "1-2-3 * * * *", "*-5 * * * *", "*-5-6 * * * *", "?-3 * * * *", "*/5/2 * * * *", "*/ * * * *", "-5 * * * *",
    "5- * * * *", "0 */jan * * *", "0 2 * */feb *", "? ? ? ? ?", "5/10 ? * * ?",
    # lists
    "1,2,3 * * * *", "1,,2 * * * *", ", * * * *", "1, * * * *", ",1 * * * *",
    # names
    "0 2 * jan-mar,DEC sun,sat", "0 2 * JAN *", "0 2 * * mon-fri", "0 2 * * MonDay", "0 2 * january *",
    "0 2 * * funday", "0 jan * * *", "0 2 * * sun-sat", "0 2 * * sat-sun",
    # field counts and whitespace
    "0 2 * *", "0 2 * * * *", "0  2 * * *", "\t0 2 * * *\n", "0\u00a02 * * *", "0\u001c2 * * *", "", "   ",
    "0 2 * * * # nightly",
    # descriptors
    "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly", "@Daily", "@daily ",
    " @daily", "@reboot", "@", "@every",
]
EVERY = ["6h", "1h", "1h30m", "90s", "1.5h", ".5h", "5.s", "0", "+0", "-0", "-5m", "+5m", "1", "1x", "1h ", " 1h", "",
         ".", ".s", "1..5h", "1h-2m", "1H", "1us", "1\u00b5s", "1\u03bcs", "300ms", "1ns", "1d", "2562047h",
         "2562048h", "9223372036854775807ns", "9223372036854775808ns", "-9223372036854775808ns",
         "0.000000000000000000001s", "1e3s", "1h 30m", "1h30"]
CASES = FIELDS + [f"@every {d}" for d in EVERY] + ["@every  1h", "CRON_TZ=Etc/UTC 0 2 * * *", "TZ=UTC @daily"]

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a robfig/cron checkout (folder with go.mod)")
    args = parser.parse_args()
    checkout = args.checkout.resolve()
    commit, tag = checkout_version(checkout)
    answers = json.loads(go_run(checkout, "github.com/robfig/cron/v3", "v3.0.0", GO_MAIN, json.dumps(CASES)))
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps({
        "source": f"github.com/robfig/cron/v3 {tag} ({commit}) ParseStandard, run with {go_version()}",
        "generator": "scripts/derive_cron_cases.py",
        "cases": answers,
    }, indent=1, ensure_ascii=False) + "\n")
    accepted = sum(1 for a in answers if "error" not in a)
    print(f"wrote {FIXTURE.relative_to(ROOT)}: {len(answers)} schedules, {accepted} accepted")


if __name__ == "__main__":
    main()
