"""Word lists for the procedural sample task (mstar/tasks/sample_gen.py).

Everything here was written for mstar: first names, invented place, company, team, race, band
and book names, and the small-talk lines that pad a session. Real city names appear only as
places people live in or visit. The lists are plain tuples so the generator can draw from them
with a seeded `random.Random` and get the same task on every machine.

Some words are chosen for the offline answerer (mstar/offline/answer_span.py): proper names are
capitalised and never written in lower case elsewhere, so they read as names; colours come from
its colour list; nothing here is a question word.
"""
from __future__ import annotations

# Speakers, with the pronoun the templates use ("When did Ines break her wrist?").
SPEAKERS_SHE = (
    "Ines", "Priya", "Oona", "Talia", "Freya", "Marisol", "Keiko", "Zofia", "Hanna", "Ayesha",
    "Delphine", "Rosalind", "Nadia", "Greta", "Imogen", "Saoirse", "Yara", "Beatriz", "Liesel",
    "Anouk", "Esme", "Farah", "Solveig", "Vesna",
)
SPEAKERS_HE = (
    "Tobias", "Rafael", "Kenji", "Anders", "Dmitri", "Oisin", "Mateo", "Kwame", "Lorcan", "Idris",
    "Henrik", "Bastian", "Emeka", "Silas", "Cormac", "Viktor", "Arjun", "Florian", "Ruben",
    "Teodor", "Ezra", "Casimir", "Nikolai", "Leander",
)
# People who are talked about but never speak: siblings, friends, partners, flatmates.
OTHERS_SHE = (
    "Wren", "Clementine", "Petra", "Maren", "Odile", "Fern", "Lucinda", "Margit", "Ottilie",
    "Sunniva", "Romilly", "Thea", "Dagny", "Isolde", "Perpetua", "Noor", "Brigid", "Elodie",
    "Tamsin", "Vivienne",
)
OTHERS_HE = (
    "Bruno", "Alaric", "Desmond", "Fitz", "Gideon", "Horace", "Jasper", "Lucan", "Magnus",
    "Otto", "Percival", "Quentin", "Rollo", "Stellan", "Ulrich", "Wolfgang", "Barnaby", "Crispin",
    "Dorian", "Evander",
)

CITIES = (
    "Lisbon", "Porto", "Tallinn", "Ljubljana", "Bergen", "Ghent", "Bologna", "Valencia",
    "Krakow", "Utrecht", "Gothenburg", "Lyon", "Seville", "Trieste", "Aarhus", "Salzburg",
    "Edinburgh", "Cork", "Riga", "Vilnius", "Zagreb", "Basel", "Tampere", "Leipzig", "Nantes",
    "Granada", "Turin", "Bruges", "Galway", "Dresden", "Malmo", "Bilbao", "Hobart", "Dunedin",
    "Halifax", "Quebec", "Oaxaca", "Cusco", "Kyoto", "Sapporo", "Busan", "Hanoi", "Penang",
    "Marrakesh", "Zanzibar", "Tbilisi", "Yerevan", "Reykjavik",
)
# Invented small towns for "where did X grow up", built from two halves.
TOWN_HEADS = ("Ash", "Bram", "Cold", "Elder", "Fern", "Gold", "Harrow", "Kestle", "Lark",
              "Mill", "North", "Oak", "Pens", "Quill", "Raven", "Sallow", "Thorn", "Wick")
TOWN_TAILS = ("combe", "ford", "mere", "wick", "haven", "stead", "by", "ton", "well", "holt")

COMPANY_HEADS = ("Redfield", "Bluestone", "Copperleaf", "Northgate", "Wildmoor", "Silverbirch",
                 "Harbourline", "Greywater", "Lanternfly", "Brightwell", "Stonechat", "Ironbark",
                 "Meadowsweet", "Foxglove", "Tidewell", "Amberly", "Kingfisher", "Larchmont")
COMPANY_TAILS = ("Clinic", "Studio", "Labs", "Books", "Bakery", "Architects", "Robotics",
                 "Press", "Brewing", "Veterinary", "Dental", "Theatre", "Analytics", "Gardens",
                 "Design", "Logistics", "Pharmacy", "Ceramics")

TEAM_HEADS = ("Riverside", "Hillcrest", "Southbank", "Elmwood", "Docklands", "Westmoor",
              "Brookside", "Larkhill", "Marshgate", "Quayside", "Cliffton", "Ferndale")
TEAM_TAILS = ("Rovers", "Otters", "Comets", "Falcons", "Herons", "Badgers", "Wolves", "Kites",
              "Hornets", "Pilots", "Lynx", "Ravens")
SPORTS = ("five-a-side football", "volleyball", "hockey", "water polo", "basketball",
          "ultimate frisbee", "netball", "rugby")

RACE_PLACES = ("Harbour", "Ridgeway", "Millbrook", "Kestrel Bay", "Saltmarsh", "Ember Valley",
               "Greenhollow", "Cobble Hill", "Lantern Point", "Moorland", "Otterburn", "Fox Lake")
RACE_KINDS = ("Half Marathon", "Trail Run", "River Swim", "Hill Climb", "Night Ten", "Duathlon")

BAND_HEADS = ("Velvet", "Paper", "Static", "Hollow", "Neon", "Quiet", "Amber", "Northern",
              "Glass", "Midnight", "Copper", "Marble")
BAND_TAILS = ("Lanterns", "Foxes", "Satellites", "Orchards", "Tides", "Pilgrims", "Engines",
              "Moths", "Harbours", "Giants", "Sparrows", "Echoes")
VENUES = ("Corn Exchange", "Old Mill", "Lamplight Hall", "Granary", "Boathouse", "Roundhouse",
          "Palm Court", "Foundry", "Assembly Rooms", "Tannery")

BOOK_HEADS = ("The Salt", "The Glass", "The Winter", "The Paper", "The Last", "The Quiet",
              "The Iron", "The Borrowed", "The Lantern", "The Hollow", "The Seventh", "The Amber")
BOOK_TAILS = ("Orchard", "Cartographer", "Lighthouse", "Archive", "Harvest", "Ferryman",
              "Almanac", "Garden", "Clockmaker", "Tide", "Observatory", "Beekeeper")
AUTHORS = ("Agnes Thornbury", "Milo Castellane", "Rhea Vandermolen", "Osric Pell",
           "Juno Halloway", "Caspar Wrenfield", "Ida Lowenthal", "Bram Okonkwo",
           "Sable Ferreira", "Lior Ashgrove", "Hester Quayle", "Emrys Dalton")

STUDIO_HEADS = ("Blue Heron", "Old Forge", "Willow", "Lighthouse", "Granite", "Marigold",
                "Saltbox", "Hummingbird", "Larkspur", "Millpond")
STUDIO_TAILS = ("Studio", "Workshop", "Academy", "Centre", "School")
CLASSES = ("pottery", "salsa", "bouldering", "woodturning", "life drawing", "glassblowing",
           "tango", "welding", "calligraphy", "beekeeping", "sourdough baking", "aerial silk",
           "fencing", "printmaking", "jewellery making", "sign language")

PET_KINDS = ("dog", "cat", "rabbit", "parrot", "tortoise", "ferret", "hamster", "gecko")
PET_NAMES = ("Pixel", "Rusty", "Biscuit", "Juniper", "Mochi", "Pickles", "Waffles", "Nimbus",
             "Pepperoni", "Clover", "Sprout", "Tofu", "Ziggy", "Noodle", "Barley",
             "Pippin", "Marmalade", "Dumpling", "Crumpet", "Figaro", "Button", "Sherbet", "Kiwi",
             "Bramble", "Gnocchi", "Truffle", "Pretzel", "Cashew", "Wasabi")

INSTRUMENTS = ("cello", "banjo", "trumpet", "ukulele", "harp", "accordion", "clarinet",
               "mandolin", "saxophone", "viola", "bassoon", "harmonica", "oboe", "sitar",
               "double bass", "tin whistle")
DESSERTS = ("lemon tart", "sticky toffee pudding", "pistachio gelato", "apple crumble",
            "baklava", "tiramisu", "rhubarb fool", "pear frangipane", "mango sorbet",
            "chocolate mousse", "carrot cake", "cherry clafoutis", "treacle tart", "panna cotta")
ITEMS = ("kayak", "canoe", "motorbike", "camper van", "telescope", "tandem bicycle", "piano",
         "sewing machine", "paddleboard", "espresso machine", "drone", "sailing dinghy",
         "pottery wheel", "rowing machine")
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "teal", "navy", "turquoise",
           "maroon", "mint", "coral", "silver", "burgundy", "olive", "lavender")
ROOMS = ("kitchen", "hallway", "bathroom", "spare room", "living room", "bedroom", "porch",
         "study")
TREES = ("cherry", "walnut", "fig", "apple", "plum", "olive", "birch", "magnolia", "quince",
         "medlar")
DISHES = ("paella", "dumpling", "curry", "fondue", "taco", "ramen", "pierogi", "tapas",
          "barbecue", "pizza")
EXAMS = ("driving test", "sommelier exam", "diving certificate", "lifeguard exam",
         "first aid course", "pilot licence exam", "bar exam", "citizenship test")
INJURIES = ("wrist", "ankle", "collarbone", "finger", "elbow", "toe", "nose", "kneecap")
SIBLINGS = ("sister", "brother")
COMPANIONS = ("cousin", "neighbour", "old school friend", "colleague", "climbing partner")
COMPANIONS_SHE = ("aunt", "godmother", "grandmother", "niece")
COMPANIONS_HE = ("uncle", "godfather", "grandad", "nephew")

# ---------------------------------------------------------------- small talk
GREETINGS = (
    "Hey {o}! Have you got a minute to catch up?",
    "Morning {o}, how has your week been?",
    "Hi {o}! I was just thinking about you.",
    "{o}! Finally, our calendars line up.",
    "Evening {o}, sorry I went quiet for a while.",
    "Hello {o}, is now a good time to chat?",
    "Hi {o}, I made tea and I am ready for gossip.",
    "{o}, there you are. I have so much to tell you.",
)
REPLIES_TO_GREETING = (
    "Always! It has been a strange few weeks.",
    "Good to hear from you. Things are busy but fine.",
    "Perfect timing, I just sat down.",
    "Yes, go on, I want all the news.",
    "Hi! I was about to message you.",
    "Of course. The weather is awful, so I am staying in anyway.",
)
REACTIONS = (
    "That is wonderful, I am so happy for you.",
    "No way! Tell me everything next time.",
    "Oh wow, that is a big step.",
    "I did not see that coming at all.",
    "Good for you, honestly.",
    "That sounds like a lot, but in a good way.",
    "Ha, that is so typical of you.",
    "I love that. Send me photos.",
    "Brilliant news.",
    "Oh, that must have been quite a day.",
    "You always surprise me.",
    "Noted, I want the full story soon.",
)
FILLERS = (
    "The bus was twenty minutes late again this morning.",
    "I have been sleeping badly because of the heat.",
    "My phone screen cracked, so everything looks like a spider web.",
    "I finally cleared out the cupboard under the stairs.",
    "Work has been a blur of meetings lately.",
    "I tried a new recipe and it was a disaster.",
    "The neighbours are doing building work, so it is loud here.",
    "I have a cold, so excuse the croaky voice.",
    "I watched a documentary about octopuses and now I cannot stop talking about them.",
    "The supermarket moved everything around and I got lost.",
    "I keep forgetting to water the plants.",
    "It rained the whole weekend, so I mostly read.",
    "I need a holiday, even a short one.",
    "My laptop decided to update itself in the middle of a call.",
    "I started drinking green tea instead of coffee, which is going badly.",
    "The park near me has a new playground and it is always full.",
    "I spent the evening untangling fairy lights.",
    "There is a fox that visits the garden every night.",
    "I have been trying to walk more, but mostly I walk to the bakery.",
    "My landlord finally fixed the boiler.",
    "Work is fine, nothing new to report there.",
    "I started a puzzle with a thousand pieces and regret it.",
    "We played board games until two in the morning.",
    "I finished the whole series in one weekend, no shame.",
    "The cat next door keeps visiting our kitchen.",
    "I live on toast when I am this busy.",
    "My team at work ordered pizza for everyone on Friday.",
    "I cannot remember the name of that café we liked.",
    "The new bakery on the corner sells out by nine.",
    "My sister keeps sending me photos of her garden.",
    "I bought new running shoes and they pinch.",
    "I moved the sofa to the other wall and it changed everything.",
    "Someone parked in front of my door again.",
    "The train was cancelled, so I worked from the station café.",
    "I am trying to read more and scroll less.",
    "We had thunder all night and the dog hid under the bed.",
    "My brother called to ask how to boil an egg.",
    "The heating came on for the first time this year.",
    "I signed up for a newsletter by accident and now get ten emails a day.",
    "I have been learning the names of birds on my walk.",
)
FILLER_REPLIES = (
    "Ugh, I know that feeling.",
    "Ha, classic.",
    "Hope that sorts itself out soon.",
    "Same here, honestly.",
    "Oh no. Hang in there.",
    "That made me laugh.",
    "Sounds about right.",
    "I would have done exactly the same.",
)
CLOSINGS = (
    "I should run, but this was lovely.",
    "Let us not leave it so long next time.",
    "Talk soon, take care.",
    "Right, dinner is burning. Bye!",
    "Speak next week?",
    "Good night, and say hi to everyone.",
)
CLOSING_REPLIES = (
    "Definitely. Bye for now!",
    "Take care, talk soon.",
    "Next week it is.",
    "Bye! Good luck with everything.",
)
