"""Generated memory workspaces for the search benchmark: realistic daily-log lines at any size.

Lines look like what a memory flush writes: bullet facts about people, places, preferences,
plans, purchases, appointments and numbers, under ``## Memory Flush — <ISO time>`` sections in
``memory/YYYY-MM-DD.md``; about one line in twenty is Chinese, Japanese or Korean. The shared
namespace and nine users each get daily files, a MEMORY.md and a few session transcripts. The
same seed always gives the same workspace.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path


def _words(text: str) -> list[str]:
    """The whitespace-separated words of ``text`` (long vocabularies stay readable)."""
    return text.split()


FIRST_NAMES = _words(
    """
    Anna Tom Maria Lukas Sofia Jonas Emma Noah Mia Elias Lena Paul Clara Felix Hannah Leon Laura
    Ben Julia Finn Sarah David Lea Max Nina Jan Eva Tim Marie Simon Katrin Oliver Amelie Moritz
    Ida Henry Olivia James Grace Daniel Chloe Samuel Ava Liam Zoe Ethan Ruby Lucas Isla Adam
    Freya Omar Layla Yusuf Amira Ravi Priya Arjun Meera Kenji Yuki Hiro Aiko Minho Jisoo Wei Mei
    Chen Lin Diego Lucia Mateo Valentina Pablo Carmen Hugo Ines Pierre Camille Louis Manon Sven
    Astrid Nils Ingrid Piotr Zofia Tomasz Agata Ivan Olga Dmitri Irina Kofi Ama Tariq Nadia Sami
    Leila
    """
)
LAST_NAMES = _words(
    """
    Becker Fischer Weber Meyer Wagner Schulz Hoffmann Koch Richter Klein Wolf Neumann Schwarz
    Zimmermann Braun Hartmann Lange Werner Krause Lehmann Smith Jones Brown Taylor Wilson Evans
    Walker Wright Green Hall Garcia Martinez Lopez Rossi Russo Bianchi Dubois Moreau Laurent
    Novak Kowalski Nowak Tanaka Suzuki Sato Kim Park Lee Wang Zhang Li Patel Sharma Singh Haddad
    Mensah
    """
)
CITIES = _words(
    """
    Berlin Munich Hamburg Cologne Frankfurt Leipzig Dresden Vienna Zurich Geneva Basel Paris
    Lyon Marseille Nice Madrid Barcelona Valencia Seville Lisbon Porto Rome Milan Naples
    Florence Turin Venice Amsterdam Rotterdam Utrecht Brussels Antwerp Copenhagen Aarhus
    Stockholm Gothenburg Oslo Bergen Helsinki Tallinn Riga Vilnius Warsaw Krakow Gdansk Prague
    Brno Budapest Bratislava Ljubljana Zagreb Split Athens Thessaloniki Istanbul London
    Manchester Edinburgh Glasgow Dublin Cork Reykjavik Toronto Montreal Vancouver Boston Chicago
    Seattle Denver Austin Portland Tokyo Osaka Kyoto Seoul Busan Singapore Bangkok Hanoi Sydney
    Melbourne Auckland Nairobi Accra Cairo Marrakesh Lagos Bogota Lima Santiago Montevideo
    """
)
COMPANIES = _words(
    """
    Siemens Bosch Zalando Spotify Klarna Adyen Booking SAP N26 Celonis Personio Shopify Stripe
    Atlassian Canva Datadog GitLab Mozilla Ubisoft Nokia Ericsson Philips
    """
)
ROLES = _words(
    """
    engineer designer manager analyst teacher nurse architect lawyer accountant researcher
    consultant editor photographer chef pharmacist translator recruiter
    """
)
DRINKS = [
    "oat milk latte",
    "green tea",
    "espresso",
    "black coffee",
    "chai",
    "matcha",
    "cold brew",
    "sparkling water",
    "rooibos",
    "flat white",
]
FOODS = [
    "ramen",
    "sushi",
    "pizza",
    "tacos",
    "pho",
    "falafel",
    "curry",
    "paella",
    "dumplings",
    "risotto",
    "lasagna",
    "shakshuka",
    "bibimbap",
    "pad thai",
    "goulash",
]
ALLERGENS = _words(
    """
    peanuts shellfish gluten lactose cats pollen penicillin sesame eggs soy
    """
)
PETS = ["dog", "cat", "rabbit", "parrot", "hamster", "tortoise", "guinea pig", "goldfish"]
PET_NAMES = _words(
    """
    Biscuit Luna Pepper Milo Nala Oscar Ziggy Mochi Olive Rocky Poppy Simba
    """
)
PRODUCTS = [
    "bike",
    "laptop",
    "standing desk",
    "espresso machine",
    "winter jacket",
    "running shoes",
    "e-reader",
    "drone",
    "tent",
    "guitar",
    "monitor",
    "backpack",
    "camera",
    "headphones",
    "sofa",
]
STORES = [
    "Decathlon",
    "IKEA",
    "MediaMarkt",
    "Amazon",
    "Zara",
    "the flea market",
    "Apple Store",
    "Saturn",
    "REI",
]
HOBBIES = [
    "bouldering",
    "pottery",
    "salsa",
    "chess",
    "sailing",
    "watercolor painting",
    "Spanish",
    "piano",
    "yoga",
    "woodworking",
    "birdwatching",
    "baking sourdough",
]
PROJECTS = _words(
    """
    Atlas Beacon Compass Dynamo Ember Falcon Granite Harbor Indigo Juniper Keystone Lumen
    """
)
BOOKS = [
    "Project Hail Mary",
    "The Overstory",
    "Dune",
    "Piranesi",
    "Educated",
    "Sapiens",
    "The Martian",
    "Circe",
    "Klara and the Sun",
    "Atomic Habits",
]
MONTHS = _words(
    """
    January February March April May June July August September October November December
    """
)
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

CJK_NAMES = _words(
    """
    小王 李娜 张伟 刘洋 陈静 王芳 赵磊 孙丽
    """
)
CJK_CITIES = _words(
    """
    北京 上海 广州 深圳 杭州 成都 西安 南京
    """
)
CJK_THINGS = _words(
    """
    咖啡 绿茶 火锅 饺子 自行车 电脑 猫 狗
    """
)
JA_NAMES = ["田中", "佐藤", "鈴木", "高橋", "山田"]
JA_CITIES = ["東京", "大阪", "京都", "名古屋", "福岡", "札幌"]
KO_NAMES = ["민수", "지은", "서연", "하준", "도윤"]
KO_CITIES = ["서울", "부산", "인천", "대구", "광주"]


def _pick(rng: random.Random, items: list[str]) -> str:
    return items[rng.randrange(len(items))]


def _person(rng: random.Random) -> str:
    return (
        f"{_pick(rng, FIRST_NAMES)} {_pick(rng, LAST_NAMES)}"
        if rng.random() < 0.3
        else _pick(rng, FIRST_NAMES)
    )


def _day_text(rng: random.Random, today: date) -> str:
    day = today + timedelta(days=rng.randrange(1, 60))
    return f"{MONTHS[day.month - 1]} {day.day}" if rng.random() < 0.6 else day.isoformat()


Template = Callable[[random.Random, date], str]

TEMPLATES: list[Template] = [
    lambda r, d: f"- {_person(r)} moved to {_pick(r, CITIES)} in {_pick(r, MONTHS)} {d.year}.",
    lambda r, d: f"- {_person(r)} prefers {_pick(r, DRINKS)} over {_pick(r, DRINKS)}.",
    lambda r, d: (
        f"- Meeting with {_person(r)} about the {_pick(r, PROJECTS)} roadmap on {_day_text(r, d)}."
    ),
    lambda r, d: (
        f"- User bought a {_pick(r, PRODUCTS)} for {r.randrange(20, 2500)} euros"
        f" at {_pick(r, STORES)}."
    ),
    lambda r, d: f"- {_person(r)}'s birthday is on {_pick(r, MONTHS)} {r.randrange(1, 29)}.",
    lambda r, d: f"- Plan: visit {_pick(r, CITIES)} with {_person(r)} next {_pick(r, WEEKDAYS)}.",
    lambda r, d: (
        f"- {_person(r)} started a new job at {_pick(r, COMPANIES)} as a {_pick(r, ROLES)}."
    ),
    lambda r, d: (
        f"- Dentist appointment on {_day_text(r, d)} at {r.randrange(8, 18)}:"
        f"{_pick(r, ['00', '15', '30', '45'])}."
    ),
    lambda r, d: f"- {_person(r)} is allergic to {_pick(r, ALLERGENS)}.",
    lambda r, d: f"- {_person(r)} adopted a {_pick(r, PETS)} named {_pick(r, PET_NAMES)}.",
    lambda r, d: (
        f"- Flight to {_pick(r, CITIES)} booked for {_day_text(r, d)}, "
        f"seat {r.randrange(1, 40)}{_pick(r, list('ABCDEF'))}."
    ),
    lambda r, d: (
        f"- Ran {r.randrange(3, 22)} km in {r.randrange(15, 130)} minutes along the river."
    ),
    lambda r, d: f"- {_person(r)} recommended the book {_pick(r, BOOKS)}.",
    lambda r, d: f"- Budget for project {_pick(r, PROJECTS)} approved: {r.randrange(5, 500)}k USD.",
    lambda r, d: f"- User wants to learn {_pick(r, HOBBIES)} this year.",
    lambda r, d: (
        f"- {_person(r)} said the {_pick(r, FOODS)} place in {_pick(r, CITIES)} was great."
    ),
    lambda r, d: f"- {_person(r)} loves {_pick(r, FOODS)} but hates {_pick(r, FOODS)}.",
    lambda r, d: (
        f"- Call {_person(r)} back about the {_pick(r, PRODUCTS)} before {_pick(r, WEEKDAYS)}."
    ),
    lambda r, d: (
        f"- User's {_pick(r, ['sister', 'brother', 'mother', 'father', 'cousin', 'aunt'])} "
        f"{_pick(r, FIRST_NAMES)} lives in {_pick(r, CITIES)}."
    ),
    lambda r, d: (
        f"- Decided to use {_pick(r, ['Postgres', 'SQLite', 'Redis', 'Kafka', 'DuckDB'])} "
        f"for the {_pick(r, PROJECTS)} service because of "
        f"{_pick(r, ['cost', 'latency', 'simplicity', 'team skills'])}."
    ),
    lambda r, d: f"- {_person(r)} has been doing {_pick(r, HOBBIES)} every {_pick(r, WEEKDAYS)}.",
    lambda r, d: (
        f"- Blood pressure {r.randrange(105, 150)}/{r.randrange(65, 95)} this morning; "
        "doctor said it is fine."
    ),
    lambda r, d: f"- Rent goes up to {r.randrange(700, 2600)} euros from {_pick(r, MONTHS)}.",
    lambda r, d: (
        f"- {_person(r)} is travelling to {_pick(r, CITIES)} for a conference "
        f"in {_pick(r, MONTHS)}."
    ),
    lambda r, d: f"- {_pick(r, CJK_NAMES)}下周去{_pick(r, CJK_CITIES)}出差",
    lambda r, d: (
        f"- {_pick(r, CJK_NAMES)}喜欢{_pick(r, CJK_THINGS)}，每天都去{_pick(r, CJK_CITIES)}的店"  # noqa: RUF001
    ),
    lambda r, d: f"- {_pick(r, JA_NAMES)}さんは{_pick(r, JA_CITIES)}に引っ越しました",
    lambda r, d: f"- {_pick(r, KO_NAMES)}는 {_pick(r, KO_CITIES)}에서 일하고 있어요",
]
_CJK_FROM = len(TEMPLATES) - 4

USERS = [None, *(f"user{i:02d}" for i in range(1, 10))]


def line(rng: random.Random, today: date) -> str:
    """One daily-log line (about one in twenty is Chinese, Japanese or Korean)."""
    if rng.random() < 0.05:
        return TEMPLATES[rng.randrange(_CJK_FROM, len(TEMPLATES))](rng, today)
    return TEMPLATES[rng.randrange(_CJK_FROM)](rng, today)


def daily_text(rng: random.Random, day: date, lines: int) -> str:
    """A daily file of about ``lines`` lines in flush sections of 5 to 15 bullets."""
    out: list[str] = []
    clock = datetime(day.year, day.month, day.day, 8, 0, 0)
    while len(out) < lines:
        clock += timedelta(minutes=rng.randrange(20, 90))
        out.append(f"## Memory Flush — {clock.isoformat()}Z")
        out.extend(line(rng, day) for _ in range(rng.randrange(5, 16)))
        out.append("")
    return "\n".join(out) + "\n"


def _transcript(rng: random.Random, day: date, entries: int) -> tuple[str, int]:
    rows = []
    for i in range(entries):
        kind = "summary" if i % 25 == 24 else "message"
        role = "user" if i % 2 == 0 else "assistant"
        rows.append(
            json.dumps(
                {
                    "type": kind,
                    "id": f"m{i}",
                    "timestamp": f"{day.isoformat()}T12:{i % 60:02d}:00Z",
                    "role": role,
                    "content": line(rng, day)[2:],
                }
            )
        )
    return "\n".join(rows) + "\n", sum(1 for i in range(entries) if i % 25 != 24)


def build_workspace(root: Path, total_lines: int, *, seed: int = 7) -> int:
    """Write a workspace of about ``total_lines`` indexable lines; returns the lines written."""
    rng = random.Random(seed)
    written = 0
    per_file = 100
    files = max(1, total_lines // per_file)
    start = date(2020, 1, 1)
    for user in USERS:
        base = root / "users" / user if user else root
        (base / "memory").mkdir(parents=True, exist_ok=True)
        (base / "MEMORY.md").write_text(
            "# Memory\n\n## People\n" + "\n".join(line(rng, start) for _ in range(30)) + "\n"
        )
        sessions = base / "agents" / "assistant" / "sessions"
        sessions.mkdir(parents=True, exist_ok=True)
        written += 32
        for s in range(3):
            text, messages = _transcript(rng, start, 40)
            (sessions / f"s{s}.log.jsonl").write_text(text)
            written += messages
    for index in range(files):
        user = USERS[index % len(USERS)]
        day = start + timedelta(days=index // len(USERS))
        base = root / "users" / user if user else root
        text = daily_text(rng, day, per_file)
        (base / "memory" / f"{day.isoformat()}.md").write_text(text)
        written += sum(1 for ln in text.split("\n") if ln.strip())
    return written


def iter_lines(root: Path) -> Iterator[str]:
    """Every non-blank memory line of a generated workspace (the rank_bm25 corpus)."""
    for path in sorted(root.rglob("*.md")):
        for raw in path.read_text().split("\n"):
            if raw.strip():
                yield raw.strip()
    for path in sorted(root.rglob("*.log.jsonl")):
        for raw in path.read_text().split("\n"):
            if raw.strip():
                entry = json.loads(raw)
                if entry["type"] == "message":
                    yield entry["content"]


QUERY_TEMPLATES: list[Callable[[random.Random], str]] = [
    lambda r: f"When did {_pick(r, FIRST_NAMES)} move to {_pick(r, CITIES)}?",
    lambda r: f"What does {_pick(r, FIRST_NAMES)} like to drink?",
    lambda r: f"Where does {_pick(r, FIRST_NAMES)} work now?",
    lambda r: f"When is {_pick(r, FIRST_NAMES)}'s birthday?",
    lambda r: f"Which {_pick(r, PRODUCTS)} did I buy?",
    lambda r: f"Is {_pick(r, FIRST_NAMES)} allergic to anything?",
    lambda r: f"What is the name of {_pick(r, FIRST_NAMES)}'s {_pick(r, PETS)}?",
    lambda r: f"flight to {_pick(r, CITIES)}",
    lambda r: f"How much was the budget for {_pick(r, PROJECTS)}?",
    lambda r: f"Who recommended {_pick(r, BOOKS)}?",
    lambda r: f"{_pick(r, FOODS)} place in {_pick(r, CITIES)}",
    lambda r: f"Why did we pick {_pick(r, ['Postgres', 'SQLite', 'Redis', 'Kafka'])}?",
    lambda r: f"dentist appointment {_pick(r, MONTHS)}",
    lambda r: f"{_pick(r, CJK_NAMES)}什么时候去{_pick(r, CJK_CITIES)}出差？",  # noqa: RUF001
    lambda r: f"{_pick(r, JA_NAMES)}さんはどこに引っ越しましたか",
    lambda r: f"{_pick(r, KO_NAMES)}는 어디에서 일해요?",
    lambda r: f"what hobby does {_pick(r, FIRST_NAMES)} do every {_pick(r, WEEKDAYS)}",
    lambda r: f"my {_pick(r, ['sister', 'brother', 'cousin'])} lives where?",
]


def queries(count: int, *, seed: int = 11) -> list[str]:
    """Realistic questions over the generated workspace."""
    rng = random.Random(seed)
    return [QUERY_TEMPLATES[rng.randrange(len(QUERY_TEMPLATES))](rng) for _ in range(count)]
