"""The example shop the web-server logs describe: its host name, catalogue and product URLs."""

from __future__ import annotations

SITE = "www.example-shop.com"
ORIGIN = f"https://{SITE}"

CATEGORIES = (
    "shoes", "sneakers", "boots", "jackets", "t-shirts", "jeans", "dresses", "accessories", "bags", "watches",
    "sportswear", "kids", "sale", "new-arrivals", "outdoor", "running", "hoodies", "socks", "hats", "gloves",
)
SEARCH_TERMS = (
    "sneakers", "winter+jacket", "running+shoes", "black+boots", "hoodie", "jeans", "nike", "adidas", "rain+jacket",
    "gift+card", "socks", "backpack", "dress", "white+sneakers", "wool+coat", "leggings", "sale", "sunglasses",
    "trail+running", "leather+bag", "kids+shoes", "beanie", "puffer+jacket", "chelsea+boots", "gym+bag",
    "swimwear", "linen+shirt", "smart+watch", "wallet", "umbrella",
)
_ADJECTIVES = ("classic", "urban", "trail", "lightweight", "premium", "vintage", "waterproof", "essential",
               "slim-fit", "oversized", "merino", "organic-cotton", "retro", "insulated", "everyday")
_NOUNS = ("leather-sneaker", "running-shoe", "parka", "hoodie", "chino", "denim-jacket", "rain-jacket", "beanie",
          "backpack", "crew-sock", "t-shirt", "chelsea-boot", "fleece", "tote-bag", "puffer-vest", "wool-coat")


def product_slug(pid: int) -> str:
    """A product's URL slug, derived from its id: a product's URL is the same every time it is requested."""
    return f"{_ADJECTIVES[pid % len(_ADJECTIVES)]}-{_NOUNS[(pid // 7) % len(_NOUNS)]}"
