"""Random field values for synthetic documents, each with the surface variants a grader accepts.

Every :class:`FieldValue` has ``shown`` (the text drawn on the image) and ``aliases``
(``shown`` first, then other spellings of the same value, deduplicated). Phone numbers
use the 555-01xx range reserved for fiction.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass

FIRST_NAMES = (
    "Maria", "James", "Aisha", "Chen", "Olivia", "Rahul", "Sofia", "Daniel", "Emma", "Kenji", "Fatima", "Lucas",
)
LAST_NAMES = (
    "Lopez", "Carter", "Okafor", "Wang", "Novak", "Patel", "Rossi", "Meyer", "Dubois", "Tanaka", "Haddad", "Silva",
)
COMPANY_WORDS = ("Northwind", "Bluebird", "Summit", "Cedar", "Harbor", "Redwood", "Maple", "Granite")
COMPANY_TRADES = ("Supplies", "Logistics", "Printing", "Consulting", "Foods", "Labs")
STREETS = ("Elm Street", "Oak Avenue", "Mill Road", "Lake Drive", "Park Lane", "High Street")
CITIES = ("Springfield", "Riverton", "Fairview", "Kingsport", "Lakeside", "Brookfield")
AREA_CODES = ("212", "312", "415", "503", "617", "720")
ITEMS = (
    "Printer paper", "Toner cartridge", "Shipping", "Consulting hours",
    "Desk lamp", "Storage boxes", "Software license",
)


@dataclass(frozen=True)
class FieldValue:
    shown: str
    aliases: tuple[str, ...]

    @staticmethod
    def of(shown: str, *others: str) -> FieldValue:
        return FieldValue(shown, tuple(dict.fromkeys((shown, *others))))


DATE_STYLES = 3
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)


def date_value(day: dt.date, style: int) -> FieldValue:
    """``day`` shown in spelling ``style`` (0: March 4, 2024; 1: 2024-03-04; 2: 4 March 2024).

    All three spellings are aliases.
    """
    month = MONTHS[day.month - 1]  # not strftime's %B, which follows the process locale
    spellings = (f"{month} {day.day}, {day.year}", day.isoformat(), f"{day.day} {month} {day.year}")
    return FieldValue.of(spellings[style], *spellings)


def random_day(rng: random.Random, first_year: int = 2018, last_year: int = 2025) -> dt.date:
    return dt.date(rng.randint(first_year, last_year), rng.randint(1, 12), rng.randint(1, 28))


def random_date(rng: random.Random) -> FieldValue:
    return date_value(random_day(rng), rng.randrange(DATE_STYLES))


def amount_value(cents: int) -> FieldValue:
    """``$1,234.50`` with aliases ``1,234.50`` and ``1234.50``."""
    dollars = cents / 100
    return FieldValue.of(f"${dollars:,.2f}", f"{dollars:,.2f}", f"{dollars:.2f}")


def random_amount(rng: random.Random, low_cents: int = 1_200, high_cents: int = 999_999) -> FieldValue:
    return amount_value(rng.randint(low_cents, high_cents))


def random_phone(rng: random.Random) -> FieldValue:
    """A fictional US number, e.g. ``(212) 555-0147``, ``212-555-0147``, ``2125550147``."""
    area, line = rng.choice(AREA_CODES), f"01{rng.randint(0, 99):02d}"
    spellings = (f"({area}) 555-{line}", f"{area}-555-{line}")
    return FieldValue.of(rng.choice(spellings), *spellings, f"{area}555{line}")


def random_person(rng: random.Random) -> FieldValue:
    return FieldValue.of(f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}")


def random_company(rng: random.Random) -> str:
    return f"{rng.choice(COMPANY_WORDS)} {rng.choice(COMPANY_TRADES)} {rng.choice(('Ltd.', 'Inc.', 'Co.'))}"


def random_address(rng: random.Random) -> str:
    return f"{rng.randint(10, 999)} {rng.choice(STREETS)}, {rng.choice(CITIES)}"


def random_reference(rng: random.Random, prefix: str) -> FieldValue:
    """An identifier such as ``INV-48213`` (alias ``48213``)."""
    number = str(rng.randint(10_000, 99_999))
    return FieldValue.of(f"{prefix}-{number}", number)
