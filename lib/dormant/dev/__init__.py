"""`dormant dev`: the whole stack on one machine (`stack`) over an embedded moto server (`moto`)."""
