"""A labelled memory log for the recall benchmark, generated deterministically from a seed.

Six months of daily files ``memory/YYYY-MM-DD.md`` (2026-01-05 to 2026-07-04), each with one
to four ``## Memory Flush — <ISO time>`` sections of bullet facts, the way a flush writes them.
About 170 *fact* lines carry something a user later asks about: moves, jobs, pets, drinks,
purchases, allergies, appointments, flights, plans, birthdays, numbers, hobbies, family, and a
set of Chinese facts. Thousands of *distractor* lines share their words: the same people and
places in other contexts, the same verbs about other people, the same objects in other plans.

Every fact comes with two or three questions phrased as a user would ask them (other
inflections, question words, possessives, punctuation), each labelled with the fact line
(path and line number) that answers it. Questions are not built from the fact's exact words:
"Where does Anna work now?" for "- Anna started working at Spotify as a designer.", "Which bike
did I buy?" for "- Bought a bike for 450 euros at Decathlon.". A few questions name the day
("What did I buy on March 14?"), which MemoryIndex can answer from the daily file's date.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path

from _memory_data import (
    ALLERGENS,
    BOOKS,
    CITIES,
    COMPANIES,
    DRINKS,
    FIRST_NAMES,
    FOODS,
    HOBBIES,
    MONTHS,
    PET_NAMES,
    PETS,
    PRODUCTS,
    ROLES,
    STORES,
    WEEKDAYS,
)

START = date(2026, 1, 5)
DAYS = 181

CN_NAMES = ["李娜", "张伟", "王芳", "刘洋", "陈静", "赵磊", "孙丽", "周杰", "吴敏", "郑凯"]
CN_CITIES = ["北京", "上海", "广州", "深圳", "杭州", "成都", "西安", "南京", "武汉", "重庆"]
CN_DRINKS = ["绿茶", "咖啡", "红茶", "豆浆", "奶茶", "乌龙茶"]
CN_COMPANIES = ["华为", "腾讯", "阿里巴巴", "字节跳动", "小米", "百度"]
CN_PETS = ["猫", "狗", "兔子", "鹦鹉"]


@dataclass
class Question:
    text: str
    answers: list[tuple[str, int]] = field(default_factory=list)
    group: str = "English"


@dataclass
class Dataset:
    files: dict[str, str]
    questions: list[Question]

    def lines(self) -> list[tuple[str, int, str]]:
        """Every non-blank line: (path, line number, stripped text)."""
        out = []
        for path, text in sorted(self.files.items()):
            for number, raw in enumerate(text.split("\n"), start=1):
                if raw.strip():
                    out.append((path, number, raw.strip()))
        return out

    def write(self, root: Path) -> None:
        for path, text in self.files.items():
            target = root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")


Fact = tuple[str, list[str]]  # (line, questions); "@" before a question: it names the day


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _facts(r: random.Random, person: str, other: str, day: date, city2: str) -> list[Fact]:
    """The fact templates about ``person`` on ``day``, each with questions a user would ask."""
    city, company, role, pet = (
        r.choice(CITIES),
        r.choice(COMPANIES),
        r.choice(ROLES),
        r.choice(PETS),
    )
    pet_name, drink, drink2 = r.choice(PET_NAMES), *r.sample(DRINKS, 2)
    product, store, price = r.choice(PRODUCTS), r.choice(STORES), r.randrange(30, 2400)
    allergen, hobby, weekday = r.choice(ALLERGENS), r.choice(HOBBIES), r.choice(WEEKDAYS)
    month, day_of_month = r.choice(MONTHS), r.randrange(1, 29)
    trip = day + timedelta(days=r.randrange(7, 60))
    trip_text = f"{MONTHS[trip.month - 1]} {trip.day}"
    seat = f"{r.randrange(2, 38)}{r.choice('ACDF')}"
    relation = r.choice(["sister", "brother", "cousin"])
    book, pin, food = r.choice(BOOKS), r.randrange(1000, 9999), r.choice(FOODS)
    date_text = f"{MONTHS[day.month - 1]} {day.day}"
    return [
        (
            f"- {person} moved to {city} with {r.choice(['her', 'his', 'their'])} partner.",
            [f"When did {person} move to {city}?", f"Where did {person} move?"],
        ),
        (
            f"- {person} started working at {company} as {_a(role)}.",
            [
                f"Where does {person} work now?",
                f"What's {person}'s new job?",
                f"When did {person} start at {company}?",
            ],
        ),
        (
            f"- {person} adopted {_a(pet)} named {pet_name}.",
            [f"What's the name of {person}'s {pet}?", f"Did {person} adopt a pet?"],
        ),
        (
            f"- {person} prefers {drink} and never drinks {drink2}.",
            [f"What does {person} prefer to drink?", f"Does {person} drink {drink2}?"],
        ),
        (
            f"- Bought a {product} for {person}'s birthday, {price} euros at {store}.",
            [
                f"What present did I buy for {person}?",
                f"How much did I pay for {person}'s {product}?",
                f"@What did I buy on {date_text}?",
            ],
        ),
        (
            f"- {person} is allergic to {allergen}.",
            [f"What is {person} allergic to?", f"Is {person} allergic to anything?"],
        ),
        (
            f"- Booked a flight to {city2} for {trip_text}, seat {seat}.",
            [
                f"When is my flight to {city2}?",
                f"Which seat do I have on the {city2} flight?",
                f"@Did I book any flights on {date_text}?",
            ],
        ),
        (
            f"- Planning a trip with {person} to {city2} in {month}.",
            [f"Who am I travelling to {city2} with?", f"When are we planning the {city2} trip?"],
        ),
        (
            f"- {person}'s birthday is on {month} {day_of_month}.",
            [f"When is {person}'s birthday?", f"{person} birthday?"],
        ),
        (
            f"- {person} has been taking {hobby} classes every {weekday}.",
            [f"What class is {person} taking?", f"Which day does {person} have {hobby}?"],
        ),
        (
            f"- {person}'s {relation} {other} lives in {city}.",
            [f"Where does {person}'s {relation} live?", f"Who is {person}'s {relation}?"],
        ),
        (
            f"- The door code at {person}'s building is {pin}.",
            [f"What's the door code for {person}'s building?", f"{person} door code"],
        ),
        (
            f"- {person} recommended reading {book}.",
            [f"Which book did {person} recommend?", f"What did {person} recommend to read?"],
        ),
        (
            f"- {person} is vegetarian and loves {food}.",
            [f"Is {person} a vegetarian?", f"What food does {person} love?"],
        ),
    ]


def _cn_facts(r: random.Random, name: str) -> list[Fact]:
    city, drink = r.choice(CN_CITIES), r.choice(CN_DRINKS)
    company, pet = r.choice(CN_COMPANIES), r.choice(CN_PETS)
    pet_name = r.choice(["小白", "豆豆", "花花", "球球", "毛毛"])
    return [
        (f"- {name}下个月搬到{city}", [f"{name}什么时候搬到{city}？", f"{name}要搬去哪里？"]),  # noqa: RUF001
        (f"- {name}最喜欢喝{drink}", [f"{name}喜欢喝什么？", f"{name}爱喝{drink}吗"]),  # noqa: RUF001
        (f"- {name}现在在{company}工作", [f"{name}在哪里工作？", f"{name}在{company}上班吗？"]),  # noqa: RUF001
        (f"- {name}养了一只{pet}，名字叫{pet_name}", [f"{name}的{pet}叫什么名字？"]),  # noqa: RUF001
    ]


def _distractor(r: random.Random, people: list[str]) -> str:
    person, other = r.sample(people, 2)
    city, product, drink = r.choice(CITIES), r.choice(PRODUCTS), r.choice(DRINKS)
    options = [
        f"- Had lunch with {person} at the {r.choice(FOODS)} place near the office.",
        f"- {person} called about the weekend plans.",
        f"- {person} said {city} was too expensive to live in.",
        f"- {person} thinks {other} should move closer to work.",
        f"- Talked to {person} about {r.choice(COMPANIES)}'s hiring freeze.",
        f"- {person} was looking at a {product} online but did not buy it.",
        f"- Reminder: return the {product} to {r.choice(STORES)} by {r.choice(WEEKDAYS)}.",
        f"- {person} and {other} argued about {drink} versus {r.choice(DRINKS)}.",
        f"- {person} might visit {city} in {r.choice(MONTHS)}, nothing booked yet.",
        f"- Team lunch: {person} ordered {r.choice(FOODS)} again.",
        f"- {person} asked whether the {r.choice(PETS)} next door is friendly.",
        f"- {person}'s flight from {city} was delayed two hours.",
        f"- Meeting with {person} moved to {r.choice(WEEKDAYS)} afternoon.",
        f"- {person} is thinking about a new job in {city}.",
        f"- {person} mentioned {r.choice(HOBBIES)} as a way to relax.",
        f"- Remember to send {person} the photos from {city}.",
        f"- {person} and {other} went to a concert in {city}.",
        f"- {person} complained about the door at the office again.",
        f"- Paid {r.randrange(10, 300)} euros for groceries at the market.",
        f"- Weather in {city} was great, {person} sent pictures.",
        f"- {person} needs a ride to the airport on {r.choice(WEEKDAYS)}.",
        f"- {person} finished reading {r.choice(BOOKS)} and did not like it.",
        f"- {person}'s birthday party planning: ask {other} about the venue.",
        f"- {person} wants to learn {r.choice(HOBBIES)} one day.",
        f"- The {r.choice(PETS)} at {person}'s place knocked over the {product}.",
        f"- {r.choice(CN_NAMES)}说{r.choice(CN_CITIES)}的天气很好",
        f"- {r.choice(CN_NAMES)}和朋友去{r.choice(CN_CITIES)}旅游了",
        f"- {r.choice(CN_NAMES)}在开会，晚点回电话",  # noqa: RUF001
        f"- {r.choice(CN_NAMES)}推荐了一家{r.choice(CN_CITIES)}的餐厅",
    ]
    return r.choice(options)


@dataclass
class _Placed:
    day: int
    kind: str
    line: str
    questions: list[str]
    line_number: int = 0


def build(seed: int = 2026) -> Dataset:
    """Generate the labelled log (same seed, same files and questions)."""
    r = random.Random(seed)
    people = r.sample(FIRST_NAMES, 36)
    trip_cities = iter(r.sample(CITIES, len(CITIES)))
    placed: list[_Placed] = []
    for person in people[:24]:
        for kind in r.sample(range(14), 6):
            day_index = r.randrange(DAYS)
            day = START + timedelta(days=day_index)
            other = r.choice([p for p in people if p != person])
            city2 = next(trip_cities) if kind in (6, 7) else r.choice(CITIES)  # flight, trip
            line, asked = _facts(r, person, other, day, city2)[kind]
            placed.append(_Placed(day_index, str(kind), line, r.sample(asked, 2)))
    for name in CN_NAMES[:8]:
        for kind, (line, asked) in enumerate(_cn_facts(r, name)):
            placed.append(_Placed(r.randrange(DAYS), f"cn{kind}", line, asked))

    files: dict[str, str] = {}
    for day_index in range(DAYS):
        day = START + timedelta(days=day_index)
        bullets: list[tuple[str, _Placed | None]] = [
            (_distractor(r, people), None) for _ in range(r.randrange(18, 36))
        ]
        for today in (f for f in placed if f.day == day_index):
            bullets.insert(r.randrange(len(bullets) + 1), (today.line, today))
        out: list[str] = []
        clock = datetime(day.year, day.month, day.day, 9, 0)
        chunk = max(1, len(bullets) // r.randrange(1, 5))
        for start in range(0, len(bullets), chunk):
            clock += timedelta(minutes=r.randrange(30, 180))
            out.append(f"## Memory Flush — {clock.isoformat()}Z")
            for line, placed_fact in bullets[start : start + chunk]:
                out.append(line)
                if placed_fact is not None:
                    placed_fact.line_number = len(out)
            out.append("")
        files[f"memory/{day.isoformat()}.md"] = "\n".join(out) + "\n"

    def where(fact: _Placed) -> tuple[str, int]:
        return f"memory/{(START + timedelta(days=fact.day)).isoformat()}.md", fact.line_number

    questions: list[Question] = []
    for fact in placed:
        for text in fact.questions:
            if text.startswith("@"):  # any fact of its kind that day answers it
                same = [f for f in placed if f.day == fact.day and f.kind == fact.kind]
                questions.append(Question(text[1:], [where(f) for f in same], "names a day"))
            else:
                group = "Chinese" if fact.kind.startswith("cn") else "English"
                questions.append(Question(text, [where(fact)], group))
    return Dataset(files, questions)
