"""The request meta keys of a listing pass."""

#: The listing page a request is for (its position in the pass).
LISTING_PAGE = "listing_page"
#: PRODUCT_IDS=list: the listing page whose ids a product request is for.
LISTED_ON = "listed_on"
