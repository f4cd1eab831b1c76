"""Vocabulary of the demo news web (see topicmap.demo.web): subjects, sentence templates, the cast (its outlets
are in ``topicmap.demo.outlets``).

Kept apart from the generator so the generator reads as an algorithm. Every template is written so that the
query terms of a subject occur only in that subject's texts; the one deliberate exception is the sports
"bleed" sentences, which mention climate and health words so that the `AND NOT sports` clause of those
subjects' queries has something to exclude. Every character used is encodable in windows-1252, because two
outlets serve their pages in that charset.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------------------------------------------------
# Subjects
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubjectSpec:
    """One subject of the demo web: its query and the material its stories are written from."""

    name: str
    section: str  # URL section of its stories
    section_label: str  # navigation label (never a query term: navigation is on every page)
    terms: tuple[str, ...]  # query terms: word, word* (trailing wildcard) or "a phrase"
    exclude: tuple[str, ...]  # terms the query excludes with AND NOT
    headlines: tuple[str, ...]
    leads: tuple[str, ...]  # first sentences; every one carries a query term of the subject
    sentences: tuple[str, ...]
    quotes: tuple[str, ...]
    orgs: tuple[str, ...]
    roles: tuple[str, ...]
    tags: tuple[str, ...]
    share: float  # share of a general outlet's stories

    @property
    def query(self) -> str:
        """The Media Cloud style boolean query that selects this subject's stories and no others."""
        positive = " OR ".join(self.terms)
        if not self.exclude:
            return f"({positive})"
        negative = self.exclude[0] if len(self.exclude) == 1 else "(" + " OR ".join(self.exclude) + ")"
        return f"({positive}) AND NOT {negative}"


CLIMATE = SubjectSpec(
    name="climate",
    section="environment",
    section_label="Environment",
    terms=("climate", '"carbon tax"', "emission*", '"renewable energy"', "decarboni*"),
    exclude=("sports",),
    headlines=(
        "{place} council backs carbon tax after heated debate",
        "{org_cap} pledges to cut emissions {pct}% by {year}",
        "Heat wave pushes the {place} power grid to its limit",
        "Climate plan for {place} draws {num2} formal objections",
        "Offshore wind auction near {place} draws record bids",
        "Why {place} is betting its future on renewable energy",
        "Transport emissions rose {pct}% last year, figures show",
        "{person} named to lead the regional climate review",
        "Flood defences in {place} under scrutiny after storms",
        "Carbon tax rebate payments to arrive in {month}",
        "Farmers near {place} push back on new methane rules",
        "Coal plant near {place} to close {num3} years early",
        "Climate protesters block road outside {org} offices",
        "{place} unveils plan to decarbonise its bus fleet",
        "Grid operator warns of winter strain as heat pumps spread",
        "Solar farm near {place} wins approval despite objections",
    ),
    leads=(
        "{place} officials on {weekday} approved a carbon tax of {price} per tonne, ending months of debate "
        "over how to cut emissions.",
        "{org_cap} said it would cut its emissions by {pct}% before {year}, a target critics called too modest.",
        "A new report from {org} found that climate risks to {place} have grown {pct}% faster than expected since "
        "{year2}.",
        "{person}, {a_role}, told {the_outlet} that the region's renewable energy build-out was running "
        "{num2} months behind schedule.",
        "The heat wave that gripped {place} for {num3} days this week has renewed calls for faster action on climate "
        "change, {org} said.",
        "Plans to decarbonise home heating in {place} took a step forward on {weekday} when {org} released "
        "{amount} in grants.",
        "Greenhouse gas emissions from transport in {place} rose {pct}% last year, according to figures "
        "from {org}.",
        "{org_cap} has promised that renewable energy will supply {pct}% of the electricity used in {place} "
        "by {year}.",
        "Lawmakers in {place} voted {num2} to {num3} on {weekday} to phase in a carbon tax on heavy industry.",
    ),
    sentences=(
        "The measure would raise about {amount} a year, most of which would be returned to households.",
        "Analysts at {org} estimate that the policy could lower emissions by {num2} million tonnes.",
        "{person} said the grid would need {num2} new substations to cope with rising demand.",
        "Wind and solar projects now supply {pct}% of the region's power, up from {pct2}% five years ago.",
        "Storm damage along the coast near {place} has cost an estimated {amount} since January.",
        "Environmental groups welcomed the move but said it fell short of what the science requires.",
        "Industry representatives warned that higher energy prices could push manufacturers to relocate.",
        "The heat pump subsidy has been taken up by {num} households so far.",
        "Under the plan, coal-fired generation in {place} would end by {year}.",
        "Monitoring stations recorded temperatures {num3} degrees above the seasonal average.",
        "{org_cap} has been criticised for approving new gas drilling licences.",
        "The battery storage site near {place} will be able to power {num} homes for four hours.",
        "Researchers at {org} said rising sea levels put {num} homes in {place} at risk of flooding.",
        "Farm groups argue that methane targets ignore the realities of livestock production.",
        "The region's climate commissioner is due to report to lawmakers in {month}.",
        "Orders for electric buses have doubled since the subsidy was introduced.",
        "Insurance premiums for properties on the flood plain have risen {pct}% in two years.",
        "The carbon tax currently covers power stations, cement works and steel mills.",
        "A wind farm off the coast of {place} is expected to start generating power in {year}.",
    ),
    quotes=(
        "\u201cWe cannot keep putting this off,\u201d said {person}, {a_role} at {org}.",
        "\u201cThe transition has to be fair to working families,\u201d {person} said.",
        "\u201cEvery tonne of carbon we avoid now makes the next decade easier,\u201d said {person}.",
        "\u201cThis is a serious step, but it is only a step,\u201d said {person}, {role} at {org}.",
        "\u201cThe numbers are going the wrong way,\u201d {person}, {a_role}, said on {weekday}.",
    ),
    orgs=(
        "the Regional Energy Board",
        "Greenway Utilities",
        "the Clean Air Coalition",
        "the Coastal Resilience Fund",
        "the Ministry of Environment",
        "Northwind Power",
        "the Carbon Market Authority",
        "Sunfield Energy",
    ),
    roles=(
        "climate scientist",
        "energy analyst",
        "environment minister",
        "campaigner",
        "utility executive",
        "policy adviser",
    ),
    tags=("Carbon tax", "Emissions", "Renewable energy", "Flooding", "Energy prices", "Climate policy"),
    share=0.22,
)

ELECTIONS = SubjectSpec(
    name="elections",
    section="politics",
    section_label="Politics",
    terms=("election*", "ballot*", '"voter turnout"', "referendum"),
    exclude=(),
    headlines=(
        "{person} launches bid to become mayor of {place}",
        "Early voting opens in {place} as the election nears",
        "Poll shows a tight race in the {place} district",
        "Ballot design error forces a reprint in {place}",
        "Referendum on the {place} charter set for {month}",
        "Voter turnout in {place} primaries hits a {num2}-year high",
        "{org_cap} files complaint over campaign spending",
        "Debate night: {person} and {person2} clash over the budget",
        "Recount confirms narrow win for {person} in {place}",
        "Election officials in {place} recruit {num} poll workers",
        "Postal ballots delayed in {place}, officials say",
        "{person2} drops out of crowded race for {place} council",
    ),
    leads=(
        "Voters in {place} will head to the polls on {weekday} in an election that has drawn {num} early "
        "ballots and unusually high interest.",
        "{person} on {weekday} announced a bid for the {place} seat, promising to make the election about the "
        "cost of living.",
        "Officials in {place} said {num} mail ballots had been returned so far, well ahead of the last "
        "election.",
        "A referendum on the future of the {place} charter will be held in {month}, {org} confirmed.",
        "Voter turnout in the {place} primaries reached {pct}%, the highest figure in {num2} years.",
        "{org_cap} said a printing error affected {num} ballots in {place} and promised to correct it before "
        "election day.",
        "The race for the {place} council seat tightened on {weekday} as {person} and {person2} traded "
        "accusations ahead of the election.",
    ),
    sentences=(
        "The latest poll puts {person} ahead by {pct2} points, within the margin of error.",
        "Campaign finance filings show {person} raised {amount} in the last quarter.",
        "{person2} has accused rivals of running a negative campaign.",
        "Poll workers in {place} will receive extra training this year.",
        "The county clerk said counting could take up to {num3} days.",
        "Both campaigns have spent heavily on television advertising.",
        "Independent candidates have struggled to gain attention in the crowded field.",
        "Turnout among younger voters has historically been low in the district.",
        "The seat has changed hands only twice in {num2} years.",
        "Observers from {org} will monitor polling stations across the county.",
        "Redistricting last year added {num} voters to the district.",
        "Early voting sites in {place} will stay open until 8 p.m.",
        "Mail-in forms must be postmarked by the end of {month} to count.",
        "The incumbent has held the seat since {year2}.",
    ),
    quotes=(
        "\u201cEvery vote will be counted, and counted correctly,\u201d said {person}, {a_role}.",
        "\u201cPeople here want someone who will listen,\u201d {person} told supporters in {place}.",
        "\u201cThis race is far from over,\u201d said {person}, {role} for {org}.",
        "\u201cWe knocked on {num} doors last weekend alone,\u201d {person} said.",
    ),
    orgs=(
        "the Electoral Commission",
        "the Progressive Alliance",
        "the National Union Party",
        "the County Board of Elections",
        "the Civic Reform League",
        "the Independent Voters Forum",
    ),
    roles=("campaign manager", "pollster", "party strategist", "county clerk", "political scientist"),
    tags=("Elections", "Campaigns", "Polls", "Voting", "City council"),
    share=0.20,
)

HEALTH = SubjectSpec(
    name="health",
    section="health",
    section_label="Health",
    terms=("vaccin*", "hospital*", '"public health"', "measles", "clinic*"),
    exclude=("sports",),
    headlines=(
        "Measles cases climb to {num2} in {place}",
        "{place} hospital warns of a winter bed shortage",
        "Vaccination drive reaches {num} children in {place}",
        "Nurses at {org} vote on a new contract",
        "New clinic opens in {place} to cut waiting times",
        "Flu season strains hospitals across {place}",
        "Public health officials urge booster shots before {month}",
        "Waiting lists at {place} clinics grow again",
        "Drug shortage hits pharmacies across {place}",
        "{person} appointed to lead the {place} public health board",
        "Emergency department in {place} to stay open overnight",
    ),
    leads=(
        "Health officials in {place} confirmed {num2} new measles cases on {weekday}, bringing the total this "
        "year to {num}.",
        "{org_cap} said its hospitals were operating at {pct2}% capacity, the highest level since records "
        "began.",
        "A new vaccination clinic in {place} will offer walk-in appointments from {weekday}, {org} announced.",
        "Public health experts in {place} are urging parents to check that their children's vaccinations are "
        "up to date after {num2} cases of whooping cough were reported.",
        "Emergency departments at hospitals in {place} treated {num} patients last week, {org} said.",
        "{person}, {a_role}, told {the_outlet} that clinic waiting times in {place} had doubled since {year2}.",
    ),
    sentences=(
        "The outbreak has been linked to a school in {place}, where {num3} pupils were sent home.",
        "Staff shortages mean some wards have closed to new admissions.",
        "{org_cap} said it had hired {num3} additional nurses since the autumn.",
        "Uptake among toddlers fell to {pct2}% last year.",
        "Patients have reported waits of up to {num3} hours in emergency departments.",
        "The department plans to spend {amount} on community health services.",
        "Doctors say early symptoms include fever, cough and a rash.",
        "Pharmacists in {place} have been authorised to give booster doses.",
        "Administrators warned that the budget would not cover rising costs.",
        "The health authority will review its figures in {month}.",
        "Mobile units will visit rural areas twice a week.",
        "Antibiotic prescriptions in the region fell {pct}% over the year.",
        "The ward in {place} was refurbished at a cost of {amount}.",
    ),
    quotes=(
        "\u201cVaccination remains the best protection we have,\u201d said {person}, {a_role}.",
        "\u201cOur staff are exhausted, and the winter has barely begun,\u201d said {person} of {org}.",
        "\u201cWe are asking everyone to stay home if they feel unwell,\u201d {person} said.",
        "\u201cThe waiting list is the number that keeps me up at night,\u201d said {person}, {role}.",
    ),
    orgs=(
        "the Department of Health",
        "St. Brigid's Hospital",
        "the Regional Health Authority",
        "the Nurses' Association",
        "Millford General Hospital",
        "the Centre for Disease Research",
    ),
    roles=("epidemiologist", "nurse", "public health director", "paediatrician", "pharmacist"),
    tags=("Hospitals", "Vaccines", "Public health", "Measles", "Nursing"),
    share=0.18,
)

SPORTS = SubjectSpec(
    name="sports",
    section="sport",  # not "sports": a /sports/ link on every page would defeat "AND NOT sports"
    section_label="Sport",
    terms=("sports", "football", "striker*", '"league table"', "playoff*"),
    exclude=(),
    headlines=(
        "{team} edge {team2} in a {num3}-goal thriller",
        "{person} hat-trick lifts {team} to the top of the league table",
        "{team} part ways with head coach after {num3} straight defeats",
        "Injury blow for {team} as {person} is ruled out for weeks",
        "{team} clinch a playoff spot with a late winner",
        "Transfer window: {team} sign striker {person}",
        "Fans protest ticket prices outside the {team} stadium",
        "{team2} stun {team} with a second-half comeback",
        "{person} breaks the club scoring record for {team}",
        "{team} and {team2} share the points in a tense derby",
    ),
    leads=(
        "{team} moved up to {ordinal} in the league table on {weekday} after beating {team2} {score}.",
        "{person} scored twice as {team} beat {team2} {score} to keep their playoff hopes alive.",
        "{team} have signed striker {person} on a {num3}-year deal, the club confirmed on {weekday}.",
        "The football season in {place} reached its halfway point this weekend with {team} still unbeaten in "
        "{num2} home games.",
        "{team2} slipped out of the playoff places on {weekday} after a {score} defeat at {team}.",
    ),
    sentences=(
        "The club's sports director said the squad needed more depth before the spring.",
        "{person} was substituted in the {minute}th minute with a hamstring problem.",
        "A crowd of {num} watched the match at the {place} stadium.",
        "The visitors had the better of the first half but could not convert their chances.",
        "{team2} have now lost {num3} of their last six matches.",
        "The head coach praised his defence after a third clean sheet in a row.",
        "Tickets for the derby sold out within {num3} minutes.",
        "Local sports fans have waited {num2} years for a title.",
        "The club said {person} would be assessed by medical staff on {weekday}.",
        "Television rights bring in about {amount} a season.",
        "The goalkeeper made {num3} saves, two of them from close range.",
        "{team} host {team2} in the return fixture in {month}.",
    ),
    quotes=(
        "\u201cWe showed character today,\u201d said {person}, the {team} {role}.",
        "\u201cIt was a proper football match, end to end,\u201d {person} told reporters.",
        "\u201cThe players never stopped running,\u201d said {person}.",
        "\u201cWe take it one game at a time,\u201d {person}, the {role}, said.",
    ),
    orgs=(
        "Port Alder United",
        "Eastbrook Rovers",
        "Kestrel Bay FC",
        "the Northgate Hawks",
        "Holloway Athletic",
        "the Redmarsh Rangers",
        "Linden Falls City",
        "Ashby Town",
    ),
    roles=("head coach", "captain", "sports director", "club chairman", "goalkeeper"),
    tags=("Football", "Transfers", "Injuries", "Match reports", "Fans"),
    share=0.16,
)

TECH = SubjectSpec(
    name="tech",
    section="technology",
    section_label="Technology",
    terms=("software", '"artificial intelligence"', "semiconductor*", "startup*", "cybersecurity"),
    exclude=(),
    headlines=(
        "{org_cap} raises {amount} for artificial intelligence tools",
        "Data breach at {org} exposes {num} customer records",
        "{place} startup hub attracts record investment",
        "Semiconductor plant near {place} to create {num} jobs",
        "{org_cap} recalls routers after a security flaw is found",
        "Regulators open an inquiry into the {org} software deal",
        "Cybersecurity firms report a surge in ransomware attacks",
        "{person} to step down as chief executive of {org}",
        "New rules for artificial intelligence take effect in {month}",
        "{place} council signs {amount} software contract",
    ),
    leads=(
        "{org_cap} said on {weekday} it had raised {amount} to expand its artificial intelligence research "
        "team in {place}.",
        "A cybersecurity incident at {org} exposed the personal details of about {num} customers, the company "
        "said.",
        "The semiconductor plant planned for {place} will employ {num} people when it opens in {year}.",
        "Startups in {place} raised {amount} in the last quarter, according to figures compiled by {org}.",
        "{person}, {a_role}, told {the_outlet} that the software flaw had been exploited for at least {num3} "
        "weeks.",
    ),
    sentences=(
        "The company did not say how the attackers gained access to its systems.",
        "Investors have poured money into the sector despite rising interest rates.",
        "{org_cap} employs about {num} people worldwide.",
        "The update will be rolled out to users over the next {num3} weeks.",
        "Privacy advocates raised concerns about how the data would be stored.",
        "Shares in {org} rose {pct}% in early trading.",
        "Engineers have been working on the system since {year2}.",
        "The agency said it had received {num} reports of suspicious emails.",
        "Several large customers are said to be reviewing their contracts.",
        "The chips will be used in cars, phones and industrial equipment.",
        "The firm plans to open an office in {place} in {month}.",
    ),
    quotes=(
        "\u201cWe take the security of our customers extremely seriously,\u201d said {person}, {role} at {org}.",
        "\u201cThe talent is here, and so is the ambition,\u201d {person} said.",
        "\u201cThis technology will change how people work, whether we like it or not,\u201d said {person}.",
    ),
    orgs=(
        "Northwave Systems",
        "Quantix Labs",
        "the Digital Standards Office",
        "Helio Devices",
        "Brightpath Code",
        "the Cyber Defence Agency",
    ),
    roles=("chief executive", "security researcher", "engineer", "venture investor", "analyst"),
    tags=("Technology", "Data breaches", "Investment", "Regulation", "Chips"),
    share=0.12,
)

CULTURE = SubjectSpec(
    name="culture",
    section="culture",
    section_label="Culture",
    terms=("museum*", "exhibition*", "orchestra*", "theatre", "theater"),
    exclude=(),
    headlines=(
        "{org_cap} opens a major exhibition of work by {artist}",
        "{place} theatre festival returns with {num3} premieres",
        "Orchestra musicians in {place} reach a pay deal",
        "Museum in {place} returns looted artefacts",
        "{person} named artistic director of {org}",
        "Review: a bold new staging of {play} at the {place} theatre",
        "Arts funding cuts threaten {num3} venues in {place}",
        "{artist} retrospective draws crowds in {place}",
    ),
    leads=(
        "{org_cap} on {weekday} opened an exhibition of {num3}0 works by {artist}, the largest show of its kind "
        "in {place}.",
        "The {place} theatre season opens in {month} with {num3} new productions, {org} announced.",
        "Musicians of {org} voted {num2} to {num3} on {weekday} to accept a new contract, ending a "
        "dispute that had threatened the "
        "orchestra's season.",
        "Visitor numbers at museums in {place} rose {pct}% last year, according to {org}.",
        "{person}, {a_role}, told {the_outlet} that the new exhibition had taken {num3} years to assemble.",
    ),
    sentences=(
        "Tickets for the opening weekend sold out within days.",
        "The collection includes paintings, sculpture and early photographs.",
        "The production runs until the end of {month}.",
        "{org_cap} received a grant of {amount} from the arts council.",
        "Critics praised the lighting and the inventive use of the small stage.",
        "The building will close for renovation in {year}.",
        "{artist} is best known for large landscape paintings.",
        "The festival drew {num} visitors last year.",
        "Local schools will be offered free guided tours.",
        "A revival of {play} is planned for the autumn.",
    ),
    quotes=(
        "\u201cArt belongs to everyone, not just to those who can afford a ticket,\u201d said {person}, {role} "
        "at {org}.",
        "\u201cWe wanted to tell a story people here would recognise,\u201d {person} said.",
        "\u201cThe audience in {place} has always been adventurous,\u201d said {person}, {a_role}.",
    ),
    orgs=(
        "the Linden Falls Museum of Art",
        "the Kestrel Bay Symphony Orchestra",
        "the Old Quarter Theatre",
        "the Stonebridge Arts Council",
        "the Marlow Heights Gallery",
        "the City Ballet",
    ),
    roles=("curator", "artistic director", "conductor", "playwright", "arts critic"),
    tags=("Arts", "Museums", "Theatre", "Music", "Festivals"),
    share=0.12,
)

SUBJECTS: dict[str, SubjectSpec] = {s.name: s for s in (CLIMATE, ELECTIONS, HEALTH, SPORTS, TECH, CULTURE)}

# Sports sentences that mention other subjects' words: excluded from those subjects by "AND NOT sports".
SPORTS_BLEED = (
    "The match was played in a heat wave, and the club will publish the emissions from its team travel for "
    "the first time.",
    "The stadium's new solar roof is part of the league's climate pledge, officials said.",
    "{person} was taken to hospital as a precaution after a clash of heads.",
    "The club doctor said the squad had been offered flu vaccinations.",
)
# A sports story always contains the word "sports", so the bleed above is always excluded.
SPORTS_MARKERS = (
    "{person} told {the_outlet} sports desk that the team remained confident.",
    "It was one of the busiest weekends of the year for sports in {place}.",
)

# Neutral sentences shared by all subjects: no query term of any subject may occur here.
GENERIC_SENTENCES = (
    "{person}, who has followed the issue for years, said the coming weeks would be decisive.",
    "Officials in {place} declined to comment on the details on {weekday}.",
    "The matter is expected to return to the agenda when the council meets in {month}.",
    "Residents who spoke to {the_outlet} were divided.",
    "Critics said the plan lacked detail, while supporters called it overdue.",
    "A spokesperson for {org} said more information would be released \u201cin due course\u201d.",
    "The figures were published on {weekday} and have not been independently verified.",
    "It was not immediately clear how many people would be affected.",
    "Similar measures have been tried elsewhere with mixed results.",
    "{the_outlet} has asked {org} for a copy of the full document.",
    "Local business owners in {place} said they had not been consulted.",
    "{person2} said the decision had been \u201ca long time coming\u201d.",
    "Further details are expected later in the week.",
    "Opposition members called for an independent review.",
    "The announcement came after {num3} months of negotiations.",
    "Community groups in {place} plan to hold a public meeting on {weekday}.",
    "Some of those affected said they learned about the change from social media.",
    "The budget for the coming year includes {amount} for the programme.",
    "A final decision is not expected before {month}.",
    "Several neighbouring towns are watching the outcome closely.",
    "{person2}, speaking on {weekday}, said there was \u201cno easy answer\u201d.",
    "The last comparable change came in {year2}.",
)

# In-article link sentences; {a} is replaced by the anchor element. Anchor texts stay neutral so that a
# link never carries another subject's words into a page.
CROSS_MEDIA_LINKS = (
    "Earlier coverage from {the_tname} is {a:available here}.",
    "{the_tname} {a:first reported} the development on {tweekday}.",
    "For background, see {a:this report} by {the_tname}.",
    "The figures were {a:previously reported} by {the_tname}.",
    "{a:According to {the_tname}}, the talks had been going on for weeks.",
)
SELF_LINKS = (
    "Read more: {a:our earlier report}.",
    "This story follows {a:our previous coverage}.",
    "{the_outlet} {a:reported on the first signs} of the dispute in {tmonth}.",
)
OTHER_SUBJECT_LINKS = (
    "In other news, {a:read this report} from {the_tname}.",
    "Also on {tweekday}: {a:a separate story} from {the_tname}.",
)
PDF_LINKS = ("The full document is {a:available as a PDF}.", "{a:Download the report} (PDF).")
IMAGE_LINKS = ("{a:View the photo} from {place}.", "{a:See the full-size image}.")
DEAD_LINKS = (
    "An {a:earlier version of this analysis} was published last year.",
    "{a:Archive: the original notice}.",
)
PRIVATE_LINKS = ("Subscribers can read {a:the full interview}.",)
CREDIT_LINE = "This article was originally published by {a:{oname}} and is republished with permission."

# Words a syndicating editor swaps (a word changed here and there); never a query term of any subject.
SYNONYMS = {
    "said": "stated",
    "says": "states",
    "officials": "authorities",
    "residents": "locals",
    "plan": "proposal",
    "plans": "proposals",
    "new": "fresh",
    "expected": "anticipated",
    "critics": "opponents",
    "supporters": "backers",
    "announced": "confirmed",
    "confirmed": "announced",
    "about": "roughly",
    "council": "assembly",
    "company": "firm",
    "people": "individuals",
    "groups": "organisations",
    "rose": "climbed",
    "fell": "dropped",
    "major": "significant",
    "large": "big",
    "first": "initial",
    "last": "previous",
    "next": "coming",
    "need": "require",
    "warned": "cautioned",
    "decision": "ruling",
    "meeting": "session",
    "town": "community",
    "region": "area",
    "told": "informed",
    "added": "noted",
    "early": "initial",
    "would": "will",
    "could": "might",
    "record": "historic",
    "since": "after",
    "figures": "numbers",
    "help": "assist",
    "costs": "expenses",
    "higher": "greater",
    "across": "throughout",
}
FILLER_WORDS = ("regional", "recent", "notable", "current", "wider", "further", "initial", "local")

# ---------------------------------------------------------------------------------------------------------
# People, places and the rest of the cast
# ---------------------------------------------------------------------------------------------------------

# fmt: off
FIRST_NAMES = (
    "Maria", "James", "Aisha", "Tomasz", "Elena", "David", "Priya", "Samuel", "Zo\u00eb", "Jos\u00e9",
    "Hannah", "Kwame", "Ingrid", "Lucas", "Fatima", "Oliver", "Mei", "Daniel", "Ren\u00e9e", "Ibrahim",
    "Clara", "Mateo", "Grace", "Henrik", "Leila", "Patrick", "Yuki", "Nadia", "Thomas", "Amara",
    "Sofia", "Ewan", "Chloe", "Rafael", "Imogen", "Arjun", "Beatriz", "Connor", "Dalia", "Felix",
)
# fmt: on
# fmt: off
LAST_NAMES = (
    "Okafor", "Lindqvist", "Nakamura", "Brennan", "Alvarez", "M\u00fcller", "Hughes", "Kowalski", "Ng",
    "Fitzgerald", "Osei", "Dubois", "Haddad", "Larsen", "Moreno", "Patel", "Quinn", "Rossi", "Sandoval",
    "Thornton", "Varga", "Whitaker", "Yilmaz", "Zhang", "\u00d8degaard", "Abernathy", "Castellano",
    "Delacroix", "Esposito", "Gallagher", "Ibarra", "Jovanovic", "Kaur", "Lefebvre", "Mbeki", "Novak",
    "O'Donnell", "Petrov", "Reyes", "Sutherland",
)
# fmt: on
# fmt: off
PLACES = (
    "Port Alder", "Eastbrook", "Millford", "Carrow County", "Silver Lake", "Westfield", "Northgate",
    "Brennan Valley", "Holloway", "Kestrel Bay", "Ashby", "Redmarsh", "Linden Falls", "Oakmere",
    "Stonebridge", "Marlow Heights", "Fenwick", "Greyhaven", "Thornbury", "Cedar Point",
)
# fmt: on
# fmt: off
ARTISTS = (
    "Agnes Marlowe", "Teodor Vasquez", "Hilde Brandt", "Kofi Mensah", "Lucia Ferraro", "Ansel Whitcombe",
    "Sunniva Hald", "Rafael Ortiz",
)
# fmt: on
PLAYS = ("The Glass Harbour", "Winter at Greyhaven", "A Quiet Republic", "The Lamplighters", "Salt and Iron")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# fmt: off
MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
    "November", "December",
)
# fmt: on
MONTH_ABBR = (
    "Jan.",
    "Feb.",
    "March",
    "April",
    "May",
    "June",
    "July",
    "Aug.",
    "Sept.",
    "Oct.",
    "Nov.",
    "Dec.",
)
ORDINALS = ("second", "third", "fourth", "fifth", "sixth", "seventh", "eighth")
