"""A small hand-written English corpus for the real-model accuracy study.

Forty-eight sentences on twenty-four unrelated topics. Each topic holds one *near-paraphrase*
pair (same meaning, different wording), so the corpus can check that an encoder is working
(paraphrases score high, different topics score low) and measure how quantization moves the
sentence embeddings. Written for coaccel; no external data set.
"""

from __future__ import annotations

__all__ = ["PARAPHRASE_PAIRS", "SENTENCES", "TOPICS", "sentences"]

PARAPHRASE_PAIRS: tuple[tuple[str, str, str], ...] = (
    (
        "baking",
        "Preheat the oven before you put the bread dough inside.",
        "Heat the oven first, then place the loaf of dough in it.",
    ),
    (
        "astronomy",
        "Jupiter is the largest planet in our solar system.",
        "No planet orbiting the Sun is bigger than Jupiter.",
    ),
    (
        "finance",
        "The central bank raised interest rates to slow down inflation.",
        "To curb rising prices, the central bank increased its interest rates.",
    ),
    (
        "football",
        "The striker scored a goal in the last minute of the match.",
        "The forward scored in the final minute of the game.",
    ),
    (
        "medicine",
        "Regular exercise lowers the risk of heart disease.",
        "People who work out often are less likely to develop cardiac problems.",
    ),
    (
        "programming",
        "The function returns an empty list when the input is invalid.",
        "If the argument is not valid, the routine gives back an empty list.",
    ),
    (
        "travel",
        "Our flight to Lisbon was delayed by three hours.",
        "The plane to Lisbon left three hours later than scheduled.",
    ),
    (
        "gardening",
        "Water the tomato plants early in the morning during hot weather.",
        "When it is hot, give the tomatoes water at the start of the day.",
    ),
    (
        "music",
        "She has been learning to play the violin since she was six.",
        "She started violin lessons at the age of six.",
    ),
    (
        "weather",
        "Heavy rain is expected across the north of the country tomorrow.",
        "Tomorrow the northern regions will get a lot of rainfall.",
    ),
    (
        "pets",
        "My cat sleeps on the windowsill every afternoon.",
        "Each afternoon my cat naps on the window ledge.",
    ),
    (
        "history",
        "The Roman Empire built roads that connected distant provinces.",
        "Far-flung provinces were linked by the road network the Romans constructed.",
    ),
    (
        "chemistry",
        "Water boils at one hundred degrees Celsius at sea level.",
        "At sea level, water reaches its boiling point at 100 degrees Celsius.",
    ),
    (
        "shopping",
        "The store is offering a discount of twenty percent on all shoes.",
        "All footwear in the shop is currently twenty percent off.",
    ),
    (
        "hardware",
        "The new processor uses less power while running faster.",
        "This latest chip is quicker and consumes less energy.",
    ),
    (
        "chess",
        "She won the chess game by trapping her opponent's king.",
        "By cornering the rival king, she won the game of chess.",
    ),
    (
        "education",
        "The students handed in their essays before the deadline.",
        "The pupils submitted their papers ahead of the due date.",
    ),
    (
        "volcanoes",
        "The volcano erupted and covered the nearby villages in ash.",
        "Nearby villages were buried under ash when the volcano erupted.",
    ),
    (
        "biology",
        "Bees pollinate many of the crops that people eat.",
        "A large share of our food crops depends on pollination by bees.",
    ),
    (
        "housing",
        "Rents in the city center have doubled over the past decade.",
        "In the last ten years, the cost of renting downtown has gone up twofold.",
    ),
    (
        "ocean",
        "Coral reefs are damaged when the sea water becomes too warm.",
        "Rising ocean temperatures harm coral reefs.",
    ),
    (
        "mountains",
        "The climbers reached the summit just before sunrise.",
        "Shortly before dawn the mountaineers got to the top of the peak.",
    ),
    (
        "law",
        "The court ruled that the contract was not legally binding.",
        "According to the judges' decision, the agreement had no legal force.",
    ),
    (
        "photography",
        "A wider aperture lets more light reach the camera sensor.",
        "Opening the lens aperture wider allows more light onto the sensor.",
    ),
)
"""``(topic, sentence_a, sentence_b)``: 24 near-paraphrase pairs, each on its own topic."""

SENTENCES: tuple[str, ...] = tuple(s for _, a, b in PARAPHRASE_PAIRS for s in (a, b))
"""All 48 sentences, pair by pair: ``SENTENCES[2*i]`` and ``SENTENCES[2*i + 1]`` paraphrase
each other."""

TOPICS: tuple[str, ...] = tuple(t for t, _, _ in PARAPHRASE_PAIRS for _ in range(2))
"""The topic of each sentence of :data:`SENTENCES`."""


def sentences(n: int) -> tuple[str, ...]:
    """The first ``n`` sentences of the corpus (whole paraphrase pairs first, in order).

    Args:
        n: how many, 1 .. ``len(SENTENCES)``.

    Returns:
        Tuple of ``n`` strings.
    """
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(SENTENCES):
        raise ValueError(f"n must be an integer in [1, {len(SENTENCES)}], got {n!r}")
    return SENTENCES[:n]
