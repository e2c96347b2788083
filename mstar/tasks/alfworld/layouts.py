"""Room layouts for the synthetic ALFWorld games (data only; generation is in synth.py).

A layout is a room the generator furnishes: its receptacles (ALFRED class names and counts), the
objects that may appear in it, and which task types it can host. Games of one layout share the
room, and every object class has a *usual place* in it (two receptacle instances, fixed per
layout and chosen by a seeded draw): a generated object sits at its first usual place most of
the time, at its second often, anywhere it fits rarely. That is the regularity an expert
trajectory of the same room teaches ("the apple was on countertop 1") and what a memory program
can learn to store and retrieve; a room not seen in training (the "unseen" split) shares only
the procedures (heat with the microwave, look under the desklamp).

Names follow ALFRED: "Sink"/"Bathtub" receptacles are the basins (shown as "sinkbasin 1").
"""
from __future__ import annotations

from dataclasses import dataclass

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
# Column names of the paper's per-category tables (Tables 10 and 11).
SHORT_NAMES = {"pick_and_place_simple": "Simple", "look_at_obj_in_light": "Light",
               "pick_clean_then_place_in_recep": "Clean", "pick_heat_then_place_in_recep": "Heat",
               "pick_cool_then_place_in_recep": "Cool", "pick_two_obj_and_place": "2-Obj"}
OPENABLE = frozenset({"Cabinet", "Drawer", "Fridge", "Microwave", "Safe", "Box"})
BASINS = {"Sink": "SinkBasin", "Bathtub": "BathtubBasin"}   # id prefix -> receptacle type
# The appliance each state-changing task uses (receptacle type).
APPLIANCE = {"pick_clean_then_place_in_recep": "SinkBasin", "pick_heat_then_place_in_recep": "Microwave",
             "pick_cool_then_place_in_recep": "Fridge"}
LAMP = "DeskLamp"


@dataclass(frozen=True)
class Layout:
    name: str
    number: int                               # the "scene number" in directory names
    receptacles: tuple[tuple[str, int], ...]  # (class, count); Sink/Bathtub are basins
    objects: tuple[str, ...]                  # classes that may be placed (goal or distractor)
    task_objects: dict                        # task type -> object classes used as goals
    targets: tuple[str, ...]                  # receptacle types used as goal receptacles
    lamp_on: tuple[str, ...] = ()             # receptacle types that may hold the desk lamp

    def receptacle_types(self) -> list[str]:
        return [BASINS.get(cls, cls) for cls, _ in self.receptacles]


_KITCHEN_FOOD = ("Apple", "Bread", "Egg", "Lettuce", "Potato", "Tomato")
_KITCHEN_WARE = ("Bowl", "Cup", "Mug", "Plate", "Pan", "Pot", "Kettle", "Fork", "Knife", "ButterKnife",
                 "Ladle", "Spatula", "Spoon", "DishSponge", "SaltShaker", "PepperShaker", "SoapBottle",
                 "WineBottle")
_KITCHEN_TASKS = {
    "pick_and_place_simple": ("Apple", "Bread", "Tomato", "Potato", "Mug", "Cup", "Plate", "Bowl", "Spatula",
                              "Fork", "Knife", "SaltShaker", "PepperShaker", "Pan", "Pot", "Kettle",
                              "DishSponge", "SoapBottle", "WineBottle"),
    "pick_clean_then_place_in_recep": ("Apple", "Tomato", "Potato", "Lettuce", "Mug", "Cup", "Plate",
                                       "Bowl", "Spatula", "Fork", "Knife", "Ladle", "Spoon", "Pan",
                                       "Pot", "ButterKnife"),
    "pick_heat_then_place_in_recep": ("Apple", "Potato", "Tomato", "Egg", "Mug", "Cup", "Plate", "Bread"),
    "pick_cool_then_place_in_recep": ("Apple", "Potato", "Tomato", "Lettuce", "Bread", "Egg", "Mug", "Cup",
                                      "Plate", "Pan", "Pot", "WineBottle"),
    "pick_two_obj_and_place": ("Apple", "Tomato", "Potato", "Egg", "Mug", "Cup", "Plate", "Spatula", "Knife",
                               "Fork", "SaltShaker", "PepperShaker", "DishSponge", "SoapBottle"),
}
_KITCHEN_TARGETS = ("CounterTop", "DiningTable", "Fridge", "Cabinet", "Drawer", "Shelf", "GarbageCan",
                    "StoveBurner", "Microwave", "SinkBasin", "CoffeeMachine")

_DESK_THINGS = ("AlarmClock", "Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Pen", "Pencil",
                "Pillow", "Laptop", "Watch", "RemoteControl", "Statue", "Vase", "Box", "Cloth",
                "TissueBox", "Newspaper")
_DESK_TASKS = {
    "pick_and_place_simple": ("AlarmClock", "Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Pen",
                              "Pencil", "Pillow", "Laptop", "Watch", "RemoteControl", "Statue", "Vase",
                              "Newspaper", "TissueBox"),
    "look_at_obj_in_light": ("AlarmClock", "Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Pen",
                             "Pencil", "Pillow", "Laptop", "Watch", "RemoteControl", "Statue", "Vase"),
    "pick_two_obj_and_place": ("Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Pen", "Pencil",
                               "Pillow", "Watch", "RemoteControl", "Vase", "Newspaper"),
}

_BATH_THINGS = ("SoapBar", "SoapBottle", "ToiletPaper", "Candle", "SprayBottle", "Cloth", "HandTowel",
                "DishSponge", "TissueBox", "PaperTowel")
_BATH_TASKS = {
    "pick_and_place_simple": ("SoapBar", "SoapBottle", "ToiletPaper", "Candle", "SprayBottle", "Cloth",
                              "HandTowel", "TissueBox", "DishSponge"),
    "pick_clean_then_place_in_recep": ("Cloth", "SoapBar", "HandTowel", "DishSponge"),
    "pick_two_obj_and_place": ("SoapBar", "SoapBottle", "ToiletPaper", "Candle", "SprayBottle", "Cloth",
                               "TissueBox"),
}

LAYOUTS: dict[str, Layout] = {layout.name: layout for layout in (
    Layout("kitchen_a", 12,
           (("Cabinet", 12), ("CoffeeMachine", 1), ("CounterTop", 3), ("DiningTable", 1), ("Drawer", 4),
            ("Fridge", 1), ("GarbageCan", 1), ("Microwave", 1), ("Shelf", 3), ("Sink", 1),
            ("StoveBurner", 4), ("Toaster", 1)),
           _KITCHEN_FOOD + _KITCHEN_WARE, _KITCHEN_TASKS, _KITCHEN_TARGETS),
    Layout("bedroom_a", 301,
           (("Bed", 1), ("Desk", 2), ("Drawer", 8), ("Dresser", 1), ("GarbageCan", 1), ("LaundryHamper", 1),
            ("Safe", 1), ("Shelf", 6), ("SideTable", 2)),
           _DESK_THINGS, _DESK_TASKS, ("Bed", "Desk", "Drawer", "Dresser", "Shelf", "SideTable", "Safe",
                                       "GarbageCan"), lamp_on=("SideTable", "Desk")),
    Layout("bathroom_a", 405,
           (("Bathtub", 1), ("Cabinet", 6), ("CounterTop", 1), ("Drawer", 4), ("GarbageCan", 1),
            ("HandTowelHolder", 1), ("Sink", 2), ("Toilet", 1), ("ToiletPaperHanger", 1), ("TowelHolder", 1)),
           _BATH_THINGS, _BATH_TASKS, ("Cabinet", "CounterTop", "Drawer", "GarbageCan", "Toilet",
                                       "BathtubBasin", "HandTowelHolder", "ToiletPaperHanger")),
    # Unseen rooms: other furniture, other usual places, the same procedures.
    Layout("kitchen_b", 18,
           (("Cabinet", 9), ("CoffeeMachine", 1), ("CounterTop", 2), ("DiningTable", 1), ("Drawer", 6),
            ("Fridge", 1), ("GarbageCan", 1), ("Microwave", 1), ("Sink", 1), ("StoveBurner", 4),
            ("Toaster", 1)),
           _KITCHEN_FOOD + _KITCHEN_WARE, _KITCHEN_TASKS, _KITCHEN_TARGETS),
    Layout("livingroom_b", 214,
           (("ArmChair", 2), ("Cabinet", 4), ("CoffeeTable", 1), ("Drawer", 6), ("Dresser", 1),
            ("GarbageCan", 1), ("Shelf", 6), ("SideTable", 2), ("Sofa", 1), ("TVStand", 1)),
           _DESK_THINGS, _DESK_TASKS, ("ArmChair", "Cabinet", "CoffeeTable", "Drawer", "Dresser", "Shelf",
                                       "SideTable", "Sofa", "GarbageCan"), lamp_on=("SideTable",)),
)}
SEEN_LAYOUTS = ("kitchen_a", "bedroom_a", "bathroom_a")
UNSEEN_LAYOUTS = ("kitchen_b", "livingroom_b")
