"""The one price table: Atlas tiers and cloud instance types (approximate, dated)."""

from __future__ import annotations

# Approximate on-demand USD per hour, as listed by MongoDB (https://www.mongodb.com/pricing,
# Atlas tiers: 3-node replica set, AWS us-east-1) and the cloud providers (instance types:
# Linux list prices, AWS us-east-1, GCP us-central1, Azure East US) around mid-2025. Written
# without re-reading a live page (no web access when written): ballparks for cost-per-result
# and ops per dollar, always flagged approximate. One date for both tables: update it when
# you re-read them.
PRICES_AS_OF = "2025-06 (approximate, not re-verified)"
PRICES_SOURCE = "https://www.mongodb.com/pricing (AWS us-east-1, 3-node replica set)"
_PRICES = {
    ("AWS", "US_EAST_1"): {
        "M10": 0.08,
        "M20": 0.20,
        "M30": 0.54,
        "M40": 1.04,
        "M50": 2.00,
        "M60": 3.95,
        "M80": 7.30,
    }
}
_DEFAULT_REGION = {"AWS": "US_EAST_1"}


def price_per_hour(tier: str, provider: str = "AWS", region: str | None = None) -> float | None:
    """Approximate USD/hour of a cluster tier (see PRICES_AS_OF), None when unknown."""
    provider = provider.upper()
    region = (region or _DEFAULT_REGION.get(provider, "")).upper().replace("-", "_")
    return _PRICES.get((provider, region), {}).get(tier.upper())


def price_metadata(tier: str, provider: str = "AWS", region: str | None = None) -> dict:
    price = price_per_hour(tier, provider, region)
    if price is None:
        return {}
    return {
        "atlas_price_per_hour_usd": price,
        "atlas_price_approximate": True,
        "atlas_price_as_of": PRICES_AS_OF,
        "atlas_price_source": PRICES_SOURCE,
    }


# Instance types (see PRICES_AS_OF for where and when).
INSTANCE_PRICES = {
    # AWS EC2, us-east-1
    "t3.medium": 0.0416,
    "t3.large": 0.0832,
    "m5.large": 0.096,
    "m5.xlarge": 0.192,
    "m5.2xlarge": 0.384,
    "m5.4xlarge": 0.768,
    "m6i.large": 0.096,
    "m6i.xlarge": 0.192,
    "m6i.2xlarge": 0.384,
    "c5.large": 0.085,
    "c5.xlarge": 0.17,
    "c6i.large": 0.085,
    "c6i.xlarge": 0.17,
    "r5.large": 0.126,
    "r5.xlarge": 0.252,
    "r6i.large": 0.126,
    "r6i.xlarge": 0.252,
    "i3.large": 0.156,
    "i3.xlarge": 0.312,
    # Google Compute Engine, us-central1
    "e2-standard-2": 0.067,
    "e2-standard-4": 0.134,
    "e2-standard-8": 0.268,
    "n1-standard-2": 0.095,
    "n1-standard-4": 0.19,
    "n2-standard-2": 0.0971,
    "n2-standard-4": 0.1942,
    "n2-standard-8": 0.3885,
    "n2-highmem-4": 0.262,
    "c2-standard-4": 0.2088,
    # Azure, East US, pay as you go
    "Standard_D2s_v3": 0.096,
    "Standard_D4s_v3": 0.192,
    "Standard_D8s_v3": 0.384,
    "Standard_D2s_v5": 0.096,
    "Standard_D4s_v5": 0.192,
    "Standard_E2s_v5": 0.126,
    "Standard_E4s_v5": 0.252,
}
