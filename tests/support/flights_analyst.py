"""A scripted analyst for the nycflights13 multi-file set (benchmarks/flights_set.py), to stand in
for a model behind support/scripted_llm.py. For each question it writes a cell of its own (written
here, apart from the set's builder, from the variables cbr's first cell names: df_flights,
df_airlines, ...), and answers from what that cell printed in the sandboxed kernel, read back out of
the answer prompt. It shows the plumbing carries a right answer from the files to the grade; it
measures no model."""

from __future__ import annotations

import re

KEYS = "['origin', 'year', 'month', 'day', 'hour']"
CELLS = {
    "Which airline flew the most flights": (
        "top = df_flights.groupby('carrier').size().sort_values().index[-1]\n"
        "print('ANSWER airline=' + df_airlines.loc[df_airlines['carrier'] == top, 'name'].iloc[0])"
    ),
    "more than 5000 feet above sea level": (
        "high = df_airports.loc[df_airports['alt'] > 5000, 'faa']\n"
        "delay = df_flights.loc[df_flights['dest'].isin(high), 'dep_delay'].mean()\n"
        "print(f'ANSWER mean_dep_delay={delay:.2f}')"
    ),
    "distinct planes built before 1990": (
        "old = df_planes.query('year < 1990')['tailnum']\n"
        "jfk = df_flights[(df_flights['origin'] == 'JFK') & df_flights['tailnum'].isin(old)]\n"
        "print('ANSWER planes=' + str(jfk['tailnum'].nunique()))"
    ),
    "mean wind speed at the origin airport": (
        f"late = df_flights[df_flights['dep_delay'] > 60][{KEYS}]\n"
        f"wind = late.merge(df_weather[{KEYS} + ['wind_speed']], on={KEYS})['wind_speed'].mean()\n"
        "print(f'ANSWER mean_wind_speed={wind:.2f}')"
    ),
    "The planes of which manufacturer": (
        "made = df_flights.merge(df_planes[['tailnum', 'manufacturer']], on='tailnum')\n"
        "print('ANSWER manufacturer=' + made.groupby('manufacturer')['distance'].sum().idxmax())"
    ),
    "America/Los_Angeles time zone": (
        "pacific = df_airports.loc[df_airports['tzone'] == 'America/Los_Angeles', 'faa']\n"
        "arrivals = df_flights.loc[df_flights['dest'].isin(pacific), 'arr_delay'].dropna()\n"
        "print(f'ANSWER share_late={(arrivals > 15).mean():.4f}')"
    ),
    "observe no daylight saving time": (
        "print('N = no dst' in text_nycflights13.replace('\\n', ' '))\n"
        "print('ANSWER airports_without_dst=' + str((df_airports['dst'] == 'N').sum()))"
    ),
    "flew no flight out of New York": (
        "idle = sorted(set(df_airlines['carrier']) - set(df_flights['carrier']))\n"
        "print('ANSWER idle_airlines=' + ', '.join(idle))"
    ),
}
ANSWER = re.compile(r"^ANSWER (\w+)=(.*)$", re.MULTILINE)


def analyst(asked: list[str] | None = None):
    """Replies by the prompt's role: a one-step plan, the question's cell (again, to a fix), and an
    answer holding the last `ANSWER name=value` line the notebook printed."""

    def reply(messages: list[dict]) -> str:
        prompt = messages[-1]["content"]
        if asked is not None:
            asked.append(prompt)
        if "Write the plan" in prompt or "Write a new plan" in prompt:
            return "1. Compute the answer from the tables and print it."
        if "Write the next cell" in prompt or "failed: fix it" in prompt:
            code = next(cell for key, cell in CELLS.items() if key in prompt)
            return f"```python\n{code}\n```"
        found = ANSWER.findall(prompt)
        name, value = found[-1] if found else ("answer", "none")
        return f"The notebook computed it.\n@{name}[{value.strip()}]"

    return reply
