"""What a grep regular expression would cost PostgreSQL, judged before PostgreSQL sees it.

PostgreSQL compiles a regular expression to an automaton in which a counted repetition is
written out in full: `(a{1,100}){1,100}` becomes ten thousand states, `(a{1,200}){1,200}`
forty thousand, whose compilation ran 12.5 s past grep's 5 s statement timeout (it does not
stop for a cancel while compiling) or asked for 1.6 GB and failed. Matching then costs time
per character in proportion to the states too. So the size of the written-out automaton is
estimated here from the pattern's syntax and a pattern over `REGEX_STATES_MAX` is refused
(INVALID_ARGUMENT) before any statement runs.

Back-references (`\\1`) are refused as well: they make PostgreSQL match by backtracking,
whose time the size of the pattern does not bound.

The estimate follows PostgreSQL's advanced regular expression syntax (bracket expressions,
escapes, `(?:`, look-around, `{m,n}` bounds); it only needs to be an upper bound for valid
patterns. An invalid pattern is left to PostgreSQL, which refuses it with its own message.
"""

from __future__ import annotations

from dataclasses import dataclass

# The largest automaton (written-out atoms) grep lets PostgreSQL build. Real searches stay
# far below it (`[0-9a-f]{40}` is 40, an IPv4 address with `\d{1,3}` parts 15, `x{255}` 255,
# the largest single bound PostgreSQL allows). Measured on PostgreSQL 16 over 60 kB of long
# runs of `a`: 962 states compile in 4 ms and match in 9 ms, like a plain word; 19,601
# ((a{1,140}){1,140}b) take 177 and 143 ms, and 40,001 ((a{1,200}){1,200}b) fail asking
# for 1.6 GB. Matching time grows with the states, so the cap stays near the first.
REGEX_STATES_MAX = 1000


@dataclass(frozen=True)
class RegexCost:
    states: int  # atoms once every counted repetition is written out
    backreference: bool


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.text = pattern
        self.at = 0
        self.backreference = False

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def alternation(self) -> int:
        """Branches separated by `|` up to a `)` or the end: their costs add."""
        total = self.sequence()
        while self.peek() == "|":
            self.at += 1
            total += self.sequence()
        return total

    def sequence(self) -> int:
        total = 0
        while self.at < len(self.text) and self.peek() not in "|)":
            atom = self.atom()
            total += self.quantified(atom)
        return total

    def atom(self) -> int:
        char = self.peek()
        self.at += 1
        if char == "(":
            if self.text.startswith("?", self.at):
                # (?:...), (?=...), (?!...), (?<=...), (?<!...): the group's body counts.
                self.at += 1
                while self.at < len(self.text) and self.peek() in "<=!:":
                    self.at += 1
            inner = self.alternation()
            if self.peek() == ")":
                self.at += 1
            return max(1, inner)
        if char == "[":
            self.bracket()
            return 1
        if char == "\\":
            escaped = self.peek()
            self.at += 1
            if escaped.isdigit() and escaped != "0":
                self.backreference = True
            return 1
        return 1

    def bracket(self) -> None:
        """Skips a bracket expression: `]` first is a member, `[:class:]`, `[.x.]` and
        `[=x=]` are members, a backslash escapes (advanced syntax)."""
        if self.peek() == "^":
            self.at += 1
        if self.peek() == "]":
            self.at += 1
        while self.at < len(self.text):
            char = self.peek()
            if char == "]":
                self.at += 1
                return
            if char == "\\":
                self.at += 2
                continue
            if char == "[" and self.text[self.at + 1 : self.at + 2] in (":", ".", "="):
                close = self.text.find(self.text[self.at + 1] + "]", self.at + 2)
                self.at = len(self.text) if close < 0 else close + 2
                continue
            self.at += 1

    def bound(self) -> tuple[int, int | None] | None:
        """`{m}`, `{m,}` or `{m,n}` at the cursor (consumed), or None (a literal `{`)."""
        close = self.text.find("}", self.at)
        if close < 0:
            return None
        low, comma, high = self.text[self.at + 1 : close].partition(",")
        if not low.isdigit() or (high and not high.isdigit()):
            return None
        self.at = close + 1
        if not comma:
            return int(low), int(low)
        return int(low), int(high) if high else None

    def quantified(self, atom: int) -> int:
        """The atom's cost under the quantifiers that follow it (`a{2}{3}` nests)."""
        cost = atom
        while True:
            char = self.peek()
            if char in ("*", "+", "?"):
                self.at += 1
                cost += 1  # a loop or a skip: one more arc, not a copy
            elif char == "{":
                found = self.bound()
                if found is None:
                    return cost
                low, high = found
                # Written out: `high` copies, or `low` copies and a loop when unbounded.
                copies = low + 1 if high is None else high
                cost = max(1, cost * max(1, copies))
            else:
                return cost
            if self.peek() == "?":  # non-greedy
                self.at += 1


def regex_cost(pattern: str) -> RegexCost:
    """An upper bound on the automaton PostgreSQL builds for `pattern`."""
    parser = _Parser(pattern)
    states = 0
    while parser.at < len(pattern):
        states += parser.alternation()
        if parser.peek() == ")":  # an unbalanced `)`: PostgreSQL will refuse the pattern
            parser.at += 1
    return RegexCost(states, parser.backreference)
