#!/usr/bin/env python3
"""make_headlines.py -- writes attnext's bundled demo data: invented news headlines.

    python3 data/make_headlines.py            # rewrites data/headlines.csv, data/new_headlines.csv
    python3 data/make_headlines.py --check    # exit 1 if the committed files differ from its output

The headlines are composed here from the project's own templates and word lists, one set per
AG News category (World, Sports, Business, Sci/Tech); nothing is taken from AG News or any other
data set. Companies, clubs and people are invented; countries and cities are real places used
only as settings. The files have the shape of the AG News CSVs (data/fetch_ag_news.sh): header
`title,category`, RFC 4180 quoting, ASCII -- with LF line ends, not AG News' CRLF: RFC
4180 allows both, and a reader that splits on "\n" (as the documents' examples do) would
otherwise train on labels such as "World\r".

The data is meant to be learnable but not trivial: every category has its own vocabulary, but
people's surnames, countries, numbers and words such as "record", "deal", "talks", "launch",
"strike" and "shares" occur in several categories, and some templates sit on the border of two
categories the way real news does (a chip maker's profit filed under Sci/Tech, a club's sale
under Sports, a country's inflation under Business).

Deterministic: a splitmix64 generator with fixed seeds, so every Python 3 gives the same bytes.
Standard library only.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CATEGORIES = ["World", "Sports", "Business", "Sci/Tech"]
PER_CATEGORY = 200      # headlines.csv: 800 rows
NEW_PER_CATEGORY = 10   # new_headlines.csv: 40 rows, none of them in headlines.csv


class Rng:
    """splitmix64: small, fast and the same on every platform and Python version."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFFFFFFFFFF

    def next64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
        return z ^ (z >> 31)

    def below(self, n):
        """Uniform integer in [0, n) (rejection sampling, no modulo bias)."""
        limit = (1 << 64) - ((1 << 64) % n)
        while True:
            x = self.next64()
            if x < limit:
                return x % n

    def between(self, lo, hi):
        return lo + self.below(hi - lo + 1)

    def choice(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, p):
        return self.next64() < int(p * (1 << 64))

    def shuffle(self, items):
        for i in range(len(items) - 1, 0, -1):
            j = self.below(i + 1)
            items[i], items[j] = items[j], items[i]


# ------------------------------------------------------------------ shared word lists

SURNAMES = """Okafor Lindqvist Moreau Tanaka Haddad Kowalski Brennan Silva Novak Mensah Ortega
Fischer Rahman Costa Walsh Petrov Nakamura Dubois Adeyemi Larsen Ferreira Jansen Castillo Byrne
Aziz Holm Vargas Kimura Osei Romano Keller Duarte Sato Gallagher Mwangi Horvath Lambert Quinn
Abbasi Nilsen Torres Hayes Ivanova Conte Baptiste Ryan Suzuki Eriksen Naidoo Maddox""".split()

COUNTRIES = """France Germany Japan China India Brazil Kenya Nigeria Egypt Iran Iraq Israel Syria
Turkey Pakistan Afghanistan Russia Ukraine Mexico Colombia Venezuela Indonesia Philippines
Thailand Sudan Ethiopia Somalia Lebanon Poland Spain Italy Greece Peru Chile Argentina Nepal
Bolivia Haiti Zimbabwe Libya Yemen Jordan Georgia Serbia Canada Australia Vietnam
Morocco""".split() + ["South Korea", "North Korea", "Sri Lanka", "South Africa", "Saudi Arabia"]

CITIES = """Paris Berlin Tokyo Beijing Nairobi Cairo Baghdad Kabul Moscow Kiev Jakarta Manila
Bangkok Khartoum Beirut Ankara Islamabad Caracas Bogota Lima Seoul Lagos Karachi Madrid Rome
Athens Warsaw Tehran Damascus Amman Kathmandu Colombo Harare Tripoli Istanbul Mumbai Geneva
Brussels Vienna Belgrade Tbilisi Hanoi""".split() + ["Mexico City", "Buenos Aires", "New Delhi",
                                                     "Addis Ababa", "La Paz", "Cape Town"]

MONTHS = """January February March April May June July August September October November
December""".split()


def n_small(rng):
    return str(rng.between(2, 12))


def n_big(rng):
    n = rng.choice([rng.between(120, 990), rng.between(1, 40) * 100, rng.between(12, 95) * 1000])
    return "{:,}".format(n)


def pct(rng):
    if rng.chance(0.4):
        return "%d.%d%%" % (rng.between(0, 9), rng.between(1, 9))
    return "%d%%" % rng.between(2, 45)


def money(rng):
    if rng.chance(0.5):
        return "$%d.%d billion" % (rng.between(1, 19), rng.between(1, 9))
    return "$%d million" % (rng.between(12, 95) * 10)


def score(rng):
    a = rng.between(1, 5)
    return "%d-%d" % (a, rng.between(0, a - 1))


def year(rng):
    return str(rng.between(1988, 2003))


def growth(rng):
    return "%d.%d%%" % (rng.between(0, 7), rng.between(1, 9))


def price(rng):
    return "$%d" % (rng.between(5, 60) * 10 - 1)


def runs(rng):
    return str(rng.between(120, 480))


# ------------------------------------------------------------------ World

WORLD = {
    "leader": ["president", "prime minister", "foreign minister", "defence minister",
               "interior minister", "opposition leader", "king", "army chief"],
    "group": ["rebels", "militants", "insurgents", "gunmen", "protesters", "rioters",
              "separatists", "tribal fighters"],
    "forces": ["troops", "police", "soldiers", "peacekeepers", "border guards", "marines"],
    "org": ["UN", "NATO", "EU", "African Union", "Red Cross", "Security Council", "Arab League",
            "IAEA", "OSCE", "World Health Organisation"],
    "issue": ["border dispute", "refugee crisis", "disputed islands", "water rights",
              "nuclear programme", "prisoner exchange", "arms embargo", "constitutional reform",
              "election fraud", "gas supplies", "troop withdrawal", "kidnapped aid workers",
              "war crimes tribunal", "fishing rights"],
    "disaster": ["earthquake", "floods", "cyclone", "landslide", "wildfires", "drought",
                 "typhoon", "mudslides", "heat wave"],
    "vote": ["presidential", "parliamentary", "local", "snap", "disputed", "run-off"],
    "place": ["police station", "army base", "market", "embassy", "hotel", "polling station",
              "government building", "checkpoint"],
    "scandal": ["bribery scandal", "corruption probe", "vote-rigging claims",
                "arms deal row", "spying affair"],
    "crisis": ["famine", "civil war", "humanitarian disaster", "cholera outbreak",
               "ethnic violence"],
}

WORLD_TEMPLATES = [
    "{group} kill {n_small} in attack on {place} in {city}",
    "{country}'s {leader} arrives in {city} for talks on {issue}",
    "{org} calls for ceasefire in northern {country}",
    "{country} votes in {vote} election seen as test for {leader}",
    "{n_big} left homeless by {disaster} in {country}",
    "Death toll from {country} {disaster} rises to {n_big}",
    "{country} and {country_2} agree to resume peace talks",
    "{org} envoy warns of {crisis} in {country}",
    "Gunmen seize {n_small} foreign hostages near {city}",
    "{country} recalls ambassador from {country_2} over {issue}",
    "Thousands march in {city} against {issue} deal",
    "Car bomb explodes outside {place} in {city}, {n_small} dead",
    "{country} opposition rejects results of {vote} vote",
    "{org} to send {n_big} peacekeepers to {country}",
    "{country} vows to press ahead with {issue} despite {org} pressure",
    "{country}'s {leader} survives no-confidence vote",
    "{country} frees {n_small} {group} in goodwill gesture",
    "Aid agencies struggle to reach {disaster} victims in {country}",
    "{country} accuses {country_2} of arming {group}",
    "Talks on {issue} between {country} and {country_2} end without deal",
    "{country} court jails former {leader} {surname} for {n_small} years",
    "{forces} pull out of {city} after {n_small}-week siege",
    "{country}'s {leader} {surname} resigns amid {scandal}",
    "Foreign ministers gather in {city} to discuss {issue}",
    "{country} signs trade pact with {country_2} during state visit",
    "{org} summit in {city} puts climate on the agenda",
    "Rebel commander {surname} killed in {country} raid",
    "{country} declares state of emergency after {group} clash with {forces}",
    "Air strike on {city} suburb kills {n_small}, witnesses say",
    "{country}'s {leader}: \"No talks while {group} hold hostages\"",
    "{country} says {issue} must be settled by {month}",
    "Curfew imposed in {city} as {group} and {forces} clash",
    "{org} inspectors return to {country}",
    "{country} parliament approves new {leader} after weeks of deadlock",
    "Refugees flee fighting in {country} for {country_2}",
    "{country} expels {n_small} diplomats from {country_2} in spying row",
]

# ------------------------------------------------------------------ Sports

TOWNS = """Ashford Brookfield Carrington Dunmore Eastleigh Fairhaven Glenwood Harlow Ironbridge
Kingsbury Lakeside Milford Northgate Oakham Portland Redcliffe Southport Thornbury Westfield
Yarrow""".split()
CLUB_SUFFIX = ["United", "City", "Rovers", "Athletic", "Wanderers", "Rangers", "Hawks",
               "Lions", "Falcons", "Mariners"]

SPORTS = {
    "team": [t + " " + CLUB_SUFFIX[i % len(CLUB_SUFFIX)] for i, t in enumerate(TOWNS)],
    "event": ["Australian Open", "US Open", "Masters", "Italian Open", "Paris Masters",
              "Dubai Championships", "Madrid Open", "Swiss Indoors"],
    "tournament": ["World Cup", "European Championship", "Olympics", "Asian Cup",
                   "Africa Cup of Nations", "Copa America", "Davis Cup final", "Ryder Cup"],
    "race": ["Monaco", "Japanese", "Brazilian", "Belgian", "Hungarian", "Canadian", "Chinese"],
    "distance": ["100 metres", "200 metres", "400 metres hurdles", "1,500 metres", "marathon",
                 "pole vault", "long jump", "triple jump"],
    "position": ["striker", "goalkeeper", "quarterback", "pitcher", "midfielder", "captain",
                 "defender", "point guard", "fly-half"],
    "injury": ["knee", "ankle", "hamstring", "shoulder", "groin", "back", "wrist"],
    "cricket": ["England", "Australia", "India", "Pakistan", "Sri Lanka", "South Africa",
                "New Zealand", "West Indies", "Bangladesh", "Zimbabwe"],
    "olympic": ["swimming relay", "rowing eights", "judo", "cycling sprint", "beach volleyball",
                "gymnastics", "fencing", "wrestling"],
}

SPORTS_TEMPLATES = [
    "{team} beat {team_2} {score} to stay top of the table",
    "{surname} scores twice as {team} rout {team_2}",
    "{team} sack coach after {n_small} straight defeats",
    "{surname} wins {event} in straight sets",
    "{country} beat {country_2} {score} in World Cup qualifier",
    "{surname} signs {n_small}-year deal with {team}",
    "{injury} injury rules {surname} out of {event}",
    "{team} edge {team_2} in overtime thriller",
    "{surname} sets world record in {distance} at {city} meet",
    "{surname} takes {n_small}-shot lead into final round",
    "{team} coach defends decision to rest {surname}",
    "{surname} wins {race} Grand Prix from pole position",
    "{country} name squad for {tournament}",
    "Doping test clears {surname} ahead of {tournament}",
    "{team} clinch title with {score} win over {team_2}",
    "{surname} hits {n_small} home runs as {team} sweep {team_2}",
    "Rain stops play with {cricket} on {runs} for {n_small}",
    "{team} {position} {surname} banned for {n_small} matches",
    "{surname} to miss rest of season with {injury} injury",
    "{team} fans celebrate first cup in {n_small} years",
    "{surname} knocked out of {event} by unseeded qualifier",
    "{team} stun champions {team_2} {score}",
    "{team} agree record transfer fee for {position} {surname}",
    "Quarterback {surname} leads {team} past {team_2}",
    "{country} win Olympic gold in {olympic}",
    "{team} owner sells club to {surname} for {money}",
    "{surname} strikes late to earn {team} a draw at {team_2}",
    "{team} {position} {surname} out for {n_small} weeks with {injury} injury",
    "{surname} and {surname_2} reach {event} doubles final",
    "{country} coach quits after {tournament} exit",
    "{team} through to semi-finals after penalty shoot-out",
    "{surname} breaks course record to win by {n_small} strokes",
    "{team} hold on for {narrow} victory as {surname} sent off",
    "{surname} retires from international cricket after {n_small} Tests",
    "{team} manager: \"We deserved more than a draw\"",
    "{surname} wins stage {n_small} to take yellow jersey",
]

# ------------------------------------------------------------------ Business

BUSINESS = {
    "company": ["Halvern Foods", "Norbridge Bank", "Calder Motors", "Westmark Stores",
                "Petrolux", "Brightwater Airlines", "Ostrava Steel", "Kestrel Insurance",
                "Pinecrest Pharmaceuticals", "Meridian Retail", "Atlas Shipping",
                "Sterling Brewing", "Redfern Energy", "Granite Mutual", "Copperleaf Mining",
                "Bellmont Hotels", "Oakridge Chemicals", "Sunvale Dairy", "Tremont Textiles",
                "Ironclad Construction"],
    "segment": ["holiday", "overseas", "truck", "store", "online", "fuel", "drug", "beer"],
    "market": ["Stocks", "US stocks", "European stocks", "Tokyo stocks", "Blue chips",
               "Bank shares", "Tech shares", "Bond prices"],
    "rise": ["rise", "climb", "edge higher", "jump", "rally", "surge"],
    "fall": ["fall", "slip", "drop", "slide", "tumble", "retreat"],
    "data": ["jobs", "inflation", "retail sales", "factory orders", "housing",
             "consumer confidence", "trade"],
    "quarter": ["first-quarter", "second-quarter", "third-quarter", "fourth-quarter"],
    "commodity": ["Oil", "Crude", "Gold", "Copper", "Coffee", "Wheat", "Natural gas"],
    "currency": ["Dollar", "Euro", "Yen", "Sterling", "Peso", "Rupee"],
    "moves": ["falls", "slips", "weakens", "steadies", "gains", "firms"],
    "fault": ["brake", "steering", "fuel pump", "airbag", "wiring"],
    "carmaker": ["Calder Motors", "Vantor Automotive", "Brisk Motor", "Kessler Trucks"],
    "period": ["first quarter", "second quarter", "third quarter", "fourth quarter"],
    "unit": ["European", "insurance", "trucking", "retail", "chemicals", "cable"],
}

BUSINESS_TEMPLATES = [
    "{company} profit rises {pct} on strong {segment} sales",
    "{company} to cut {n_big} jobs as sales slump",
    "{commodity} prices {rise} as {country} supply fears grow",
    "{market} {fall} after weak {data} report",
    "{market} {rise} as {data} data beat forecasts",
    "{company} agrees to buy {company_2} for {money}",
    "{company} shares {fall} after {quarter} earnings miss forecasts",
    "{currency} {moves} ahead of central bank meeting",
    "{country} central bank raises interest rates to {pct}",
    "{company} chief executive {surname} steps down",
    "{carmaker} recalls {n_big} vehicles over {fault} fault",
    "Inflation in {country} hits {pct}, highest in {n_small} years",
    "{company} files for bankruptcy protection",
    "Regulators approve {company} merger with {company_2}",
    "{commodity} hits {n_small}-month high as investors seek safety",
    "{company} raises full-year forecast after record {month} sales",
    "Retail sales {rise} {pct} in {month}",
    "{company} wins {money} contract from {country} government",
    "{company} settles fraud lawsuit for {money}",
    "Jobless claims fall to lowest level since {year}",
    "{company} posts record quarterly loss",
    "Strike halts production at {company} plant",
    "{country} trade deficit widens to {money}",
    "{company} to return {money} to shareholders",
    "Shares of {techco} jump on strong demand for chips",
    "{techco} profit tops Wall Street estimates",
    "{country} economy grows {growth} in the {period}",
    "{company} and union reach deal to end {n_small}-day strike",
    "Fed expected to lift rates by a quarter point",
    "{company} bid for {company_2} rejected as too low",
    "{commodity} prices {fall} on signs of weaker demand",
    "Mortgage rates {rise} for {ordinal} straight week",
    "{company} sells {unit} unit to private equity firm for {money}",
    "{company} sees slower growth as costs {rise}",
    "Investors wary as {company} delays results",
    "{country} to sell stake in state airline, {company_2} interested",
]

# ------------------------------------------------------------------ Sci/Tech

SCITECH = {
    "techco": ["Quantix", "Nimbus Software", "Vireo Systems", "Helix Labs", "Orbyte",
               "Lumina Networks", "Cobalt Micro", "Sparrow Mobile", "Datacrest", "Pixelforge",
               "Zenware", "Arclight Semiconductor", "Bluefin Online", "Corvid Security"],
    "product": ["smartphone", "laptop", "search engine", "web browser", "operating system",
                "game console", "music player", "handheld computer", "digital camera",
                "flat-panel TV", "wireless router", "video chip"],
    "software": ["browser", "e-mail", "database", "media player", "office suite", "server"],
    "malware": ["worm", "virus", "Trojan", "spyware program"],
    "planet": ["Saturn", "Mars", "Jupiter's moon Europa", "Titan", "Venus", "a comet",
               "an asteroid"],
    "organism": ["the chicken", "the rat", "rice", "the honeybee", "the malaria parasite",
                 "the dog", "a sea urchin"],
    "animal": ["frog", "bat", "lizard", "fish", "orchid", "monkey", "beetle", "shark"],
    "animals": ["giant reptiles", "dinosaurs", "early mammals", "sea scorpions", "ancient birds"],
    "disease": ["heart disease", "diabetes", "Alzheimer's", "asthma", "breast cancer",
                "obesity"],
    "habit": ["coffee", "sleep loss", "red meat", "television viewing", "shift work",
              "air pollution"],
    "feature": ["desktop search", "map service", "news alerts", "free e-mail storage",
                "video search", "instant messaging"],
    "game": ["Starfall", "Iron Legion", "Kart Frenzy", "Shadow Ops", "Dungeon Quest"],
    "scientists": ["Scientists", "Researchers", "Astronomers", "Biologists", "Physicists",
                   "Engineers"],
}

SCITECH_TEMPLATES = [
    "{techco} unveils {product} with longer battery life",
    "{techco} releases patch for critical {software} flaw",
    "New {malware} spreads through e-mail attachments",
    "{scientists} spot giant planet orbiting nearby star",
    "NASA probe sends back first close-up images of {planet}",
    "{scientists} decode genome of {organism}",
    "{techco} sues {techco_2} over {product} patents",
    "{scientists} build faster chip using carbon nanotubes",
    "Study links {habit} to higher risk of {disease}",
    "{techco} launches online music store",
    "Hackers steal passwords from {n_big} accounts at {techco}",
    "Fossil find suggests {animals} lived in Antarctica",
    "Space station crew prepares for {n_small}-hour spacewalk",
    "{techco} opens test version of {product} to public",
    "Satellite data show Arctic ice shrinking faster than expected",
    "Wi-Fi hot spots spread to {n_big} cafes and airports",
    "Rocket carrying {country} satellite lifts off",
    "{techco} to ship dual-core chips next year",
    "Linux gains ground in {country} government offices",
    "Spam now makes up {pct} of all e-mail, study finds",
    "{techco} adds {feature} to its web site",
    "{scientists} find new species of {animal} in {country}",
    "{techco} profit beats forecasts on {product} sales",
    "Video game {game} tops holiday sales chart",
    "Mars rover finds more signs of ancient water",
    "Broadband users in {country} top {n_small} million",
    "{techco} and {techco_2} team up on wireless standard",
    "Stem cell study offers hope for {disease} patients",
    "{malware} targets {techco} {software} users",
    "{scientists} say climate change is shifting bird migration",
    "{techco} cuts price of {product} to {price}",
    "File-sharing networks face new lawsuits from music industry",
    "Probe flies past {planet}, sends data to Earth",
    "{techco} bets on internet phone calls",
    "Gene therapy trial for {disease} shows early promise",
    "{scientists}: \"Solar storm could disrupt satellites\"",
]

# Headlines whose wording fits several categories, as in real news (AG News files a chip
# maker's results under Business or Sci/Tech, a club takeover under Sports or Business).
# A few percent of each category's rows come from here, so no model can be perfect.
BORDER_TEMPLATES = [
    ("{techco} profit rises {pct} on {product} sales", ["Business", "Sci/Tech"]),
    ("{techco} to cut {n_big} jobs", ["Business", "Sci/Tech"]),
    ("{country} and {country_2} sign gas pipeline deal", ["World", "Business"]),
    ("{country} launches weather satellite", ["World", "Sci/Tech"]),
    ("Climate talks in {city} end without deal", ["World", "Sci/Tech"]),
    ("{surname} buys stake in {team}", ["Sports", "Business"]),
    ("{country} bids to host {tournament}", ["Sports", "World"]),
    ("{techco} chief {surname} says growth will slow", ["Business", "Sci/Tech"]),
    ("Strike hits {country} ports", ["World", "Business"]),
    ("{surname} wins {year} award", ["Sports", "Sci/Tech", "World"]),
]
BORDER_SHARE = 0.04

SOURCES = [" (Reuters)", " (AP)", " (AFP)", " (Reuters)", " (AP)"]

TABLES = {
    "World": (WORLD_TEMPLATES, WORLD),
    "Sports": (SPORTS_TEMPLATES, SPORTS),
    "Business": (BUSINESS_TEMPLATES, BUSINESS),
    "Sci/Tech": (SCITECH_TEMPLATES, SCITECH),
}

COMMON = {
    "surname": SURNAMES, "country": COUNTRIES, "city": CITIES, "month": MONTHS,
    "techco": SCITECH["techco"], "money": money, "n_small": n_small, "n_big": n_big,
    "pct": pct, "growth": growth, "narrow": ["1-0", "2-1", "3-2"], "score": score, "year": year, "price": price, "runs": runs,
    "ordinal": ["second", "third", "fourth", "fifth", "sixth", "seventh"],
}

FIELD = re.compile(r"\{([a-z]+(?:_[a-z]+)*)(?:_(\d))?\}")


def fill(template, words, rng):
    """Replace every {name} / {name_2} of template; names with the same base get distinct values."""
    used = {}

    def one(m):
        base = m.group(1)
        key = m.group(0)
        if key in used:
            return used[key]
        source = words.get(base, COMMON.get(base))
        if source is None:
            raise KeyError("template %r: no word list %r" % (template, base))
        taken = [v for k, v in used.items() if FIELD.match(k).group(1) == base]
        for _ in range(50):
            value = source(rng) if callable(source) else rng.choice(source)
            if value not in taken:
                break
        used[key] = value
        return value

    text = FIELD.sub(one, template)
    return text[0].upper() + text[1:]


def headline(category, rng):
    templates, words = TABLES[category]
    border = [t for t, cats in BORDER_TEMPLATES if category in cats]
    if rng.chance(BORDER_SHARE):
        text = fill(rng.choice(border), dict(SPORTS, **SCITECH), rng)
    else:
        text = fill(rng.choice(templates), words, rng)
    if rng.chance(0.12):
        text += rng.choice(SOURCES)
    return text


def generate(per_category, seed, exclude=()):
    """per_category distinct headlines per category, in a shuffled order."""
    rng = Rng(seed)
    seen = set(t.lower() for t in exclude)
    rows = []
    for category in CATEGORIES:
        made = 0
        while made < per_category:
            text = headline(category, rng)
            if text.lower() in seen:
                continue
            seen.add(text.lower())
            rows.append((text, category))
            made += 1
    rng.shuffle(rows)
    return rows


def csv_field(s):
    """RFC 4180: quote a field with a comma, a quote, a line break or edge whitespace."""
    if any(c in s for c in ',"\r\n') or s != s.strip():
        return '"' + s.replace('"', '""') + '"'
    return s


def csv_bytes(rows):
    lines = ["title,category"] + [csv_field(t) + "," + csv_field(c) for t, c in rows]
    return ("\n".join(lines) + "\n").encode("ascii")


def main(argv):
    check = "--check" in argv[1:]
    train = generate(PER_CATEGORY, seed=20041)
    new = generate(NEW_PER_CATEGORY, seed=77031, exclude=[t for t, _ in train])
    outputs = {"headlines.csv": csv_bytes(train), "new_headlines.csv": csv_bytes(new)}
    status = 0
    for name, data in outputs.items():
        path = os.path.join(HERE, name)
        if check:
            with open(path, "rb") as f:
                same = f.read() == data
            print("%s: %s" % (path, "up to date" if same else "DIFFERS from the generator"))
            status |= 0 if same else 1
        else:
            with open(path, "wb") as f:
                f.write(data)
            print("wrote %s (%d rows)" % (path, data.count(b"\n") - 1))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
