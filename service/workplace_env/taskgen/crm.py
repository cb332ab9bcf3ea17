"""CRM templates: update statuses and owners by rule, add and delete customers.

Sales reps are named by their capitalised first name ("Raj"), as in WorkBench's CRM queries;
customers by a full name that a search picks out exactly.
"""

from __future__ import annotations

from datetime import timedelta
from random import Random

from workplace_env.taskgen.base import CRM_CATEGORY, Call, Draft, call, pick, template
from workplace_env.taskgen.world import PRODUCTS, STATUSES, TODAY, Customer, Person, World

STATUS_WORDS = {
    "Qualified": "qualified",
    "Won": "won",
    "Lost": "lost",
    "Lead": "lead",
    "Proposal": "proposal",
}
NEW_FIRST_NAMES = (
    "Avery",
    "Casey",
    "Jordan",
    "Riley",
    "Morgan",
    "Quinn",
    "Reese",
    "Rowan",
    "Emerson",
    "Finley",
    "Harper",
    "Logan",
    "Sawyer",
    "Skyler",
    "Hayden",
    "Kendall",
)
NEW_LAST_NAMES = (
    "Brooks",
    "Carter",
    "Ellis",
    "Foster",
    "Griffin",
    "Hayes",
    "Keller",
    "Lawson",
    "Marsh",
    "Nolan",
    "Porter",
    "Sutton",
    "Vaughn",
    "Whitaker",
)
COMPANIES = ("northwind", "bluepeak", "stonebridge", "lumina", "quantix", "redfern", "oakline")


def rep_name(person: Person) -> str:
    """How a prompt names a sales rep: ``"Raj"``."""
    return person.name.capitalize()


def update(customer: Customer, field: str, value: str) -> Call:
    """The ``customer_relationship_manager_update_customer`` call."""
    return call(
        "customer_relationship_manager_update_customer",
        customer_id=customer.id,
        field=field,
        new_value=value,
    )


def delete(customer: Customer) -> Call:
    """The ``customer_relationship_manager_delete_customer`` call."""
    return call("customer_relationship_manager_delete_customer", customer_id=customer.id)


def new_customer_name(world: World, rng: Random) -> str | None:
    """A full name no customer has yet."""
    name = f"{rng.choice(NEW_FIRST_NAMES)} {rng.choice(NEW_LAST_NAMES)}"
    return None if name.lower() in world.existing_customer_names else name


def _new_lead(world: World, rng: Random) -> tuple[Person, str] | None:
    """A sales rep and a new customer's name, drawn in that order."""
    rep = pick(rng, world.reps)
    name = new_customer_name(world, rng)
    return None if rep is None or name is None else (rep, name)


def _add(name: str, rep: Person, status: str, **details: str) -> Call:
    """The ``customer_relationship_manager_add_customer`` call (``details``: email, phone,
    product interest, in that order)."""
    return call(
        "customer_relationship_manager_add_customer",
        customer_name=name,
        assigned_to_email=rep.email,
        status=status,
        **details,
    )


def customers_of(world: World, rep: Person) -> list[Customer]:
    """The customers assigned to ``rep``, in table order."""
    return [c for c in world.customers if c.rep == rep.email]


@template("crm_update_status", CRM_CATEGORY)
def update_status(world: World, rng: Random) -> Draft | None:
    """Update the status of a named customer."""
    customer = pick(rng, world.named_customers)
    if customer is None:
        return None
    status = rng.choice([s for s in STATUSES if s != customer.status])
    prompt = rng.choice(
        (
            f"Update the status of {customer.name} to {STATUS_WORDS[status]} in the crm",
            f"{customer.name} should now be marked as {STATUS_WORDS[status]} in the crm. Can you "
            "change that?",
        )
    )
    return Draft(prompt, [update(customer, "status", status)])


@template("crm_delete_customer", CRM_CATEGORY)
def delete_customer(world: World, rng: Random) -> Draft | None:
    """Delete a named customer."""
    customer = pick(rng, world.named_customers)
    if customer is None:
        return None
    prompt = rng.choice(
        (
            f"{customer.name} is no longer a customer. Can you delete them from the crm?",
            f"Delete {customer.name} from the crm",
        )
    )
    return Draft(prompt, [delete(customer)])


@template("crm_add_lead", CRM_CATEGORY)
def add_lead(world: World, rng: Random) -> Draft | None:
    """Add a new lead and assign it to a sales rep."""
    drawn = _new_lead(world, rng)
    if drawn is None:
        return None
    rep, name = drawn
    prompt = rng.choice(
        (
            f"Add {name} as a new lead in the crm and assign them to {rep_name(rep)}",
            f"We have a new lead, {name}. Please add them to the crm and assign them to "
            f"{rep_name(rep)}.",
        )
    )
    return Draft(prompt, [_add(name, rep, "Lead")])


@template("crm_add_customer_details", CRM_CATEGORY)
def add_customer_details(world: World, rng: Random) -> Draft | None:
    """Add a customer with an email, phone, product interest and status."""
    drawn = _new_lead(world, rng)
    if drawn is None:
        return None
    rep, name = drawn
    email = f"{name.replace(' ', '.')}@{rng.choice(COMPANIES)}.com".lower()
    phone = f"{rng.randint(201, 989)}-{rng.randint(200, 999)}-{rng.randint(0, 9999):04d}"
    product, status = rng.choice(PRODUCTS), rng.choice(("Lead", "Qualified", "Proposal"))
    prompt = (
        f"Add a new customer to the crm: {name}, email {email}, phone {phone}, interested in "
        f"{product.lower()}. They are at the {STATUS_WORDS[status]} stage and {rep_name(rep)} "
        "will handle them."
    )
    details = {"customer_email": email, "customer_phone": phone, "product_interest": product}
    return Draft(prompt, [_add(name, rep, status, **details)])


@template("crm_reassign_customer", CRM_CATEGORY)
def reassign_customer(world: World, rng: Random) -> Draft | None:
    """Move a named customer to another sales rep."""
    customer = pick(rng, world.named_customers)
    rep = pick(rng, world.others(world.reps, customer.rep)) if customer else None
    if customer is None or rep is None:
        return None
    prompt = rng.choice(
        (
            f"We're moving {customer.name} to {rep_name(rep)}. Can you make that change in the "
            "crm?",
            f"Reassign customer {customer.name} to employee {rep_name(rep)} in the crm",
        )
    )
    return Draft(prompt, _reassign([customer], rep))


def _handover(
    world: World, rng: Random, statuses: tuple[str, ...]
) -> tuple[Person, Person, str, list[Customer]] | None:
    """Two reps ``(old, new)``, a product, and old's customers at ``statuses`` interested in it."""
    if len(world.reps) < 2:
        return None
    old, new = rng.sample(world.reps, 2)
    product = rng.choice(PRODUCTS)
    chosen = [c for c in customers_of(world, old) if c.status in statuses and c.product == product]
    return old, new, product, chosen


def _reassign(customers: list[Customer], rep: Person) -> list[Call]:
    """The calls assigning each of ``customers`` to ``rep``."""
    return [update(c, "assigned_to_email", rep.email) for c in customers]


@template("crm_reassign_leads_product", CRM_CATEGORY)
def reassign_leads_product(world: World, rng: Random) -> Draft | None:
    """Reassign all of one rep's leads interested in a product to another rep (may be none)."""
    drawn = _handover(world, rng, ("Lead",))
    if drawn is None:
        return None
    old, new, product, chosen = drawn
    prompt = rng.choice(
        (
            f"Reassign all of {rep_name(old)}'s leads that are interested in {product.lower()} to "
            f"{rep_name(new)} in the crm.",
            f"{rep_name(new)} is taking over all of {rep_name(old)}'s leads that are interested in "
            f"{product.lower()}. Can you reassign them in the crm?",
        )
    )
    return Draft(prompt, _reassign(chosen, new))


@template("crm_give_qualified_or_proposal", CRM_CATEGORY)
def give_qualified_or_proposal(world: World, rng: Random) -> Draft | None:
    """Give one rep another rep's qualified or proposal customers interested in a product."""
    drawn = _handover(world, rng, ("Qualified", "Proposal"))
    if drawn is None:
        return None
    old, new, product, chosen = drawn
    prompt = (
        f"Give {rep_name(new)} all of {rep_name(old)}'s customers that are interested in "
        f"{product.lower()} and are either qualified or in proposal in the crm"
    )
    return Draft(prompt, _reassign(chosen, new))


@template("crm_proposal_to_lost", CRM_CATEGORY)
def proposal_to_lost(world: World, rng: Random) -> Draft | None:
    """Move customers who haven't answered a proposal for a product in N weeks to lost."""
    product = rng.choice(PRODUCTS)
    weeks = rng.randint(2, 7)
    cutoff = TODAY - timedelta(weeks=weeks)
    proposals = [c for c in world.customers if c.status == "Proposal" and c.product == product]
    if any(c.last_contact == cutoff for c in proposals):
        return None  # contacted exactly N weeks ago: in or out depends on reading
    chosen = [c for c in proposals if c.last_contact < cutoff]
    prompt = rng.choice(
        (
            f"Move all customers that haven't responded to a proposal for the {product.lower()} "
            f"product in {weeks} weeks to lost in the crm",
            f"I think there's a few customers that haven't responded to a proposal for the "
            f"{product.lower()} product in {weeks} weeks. Can you move them to lost in the crm?",
        )
    )
    return Draft(prompt, [update(c, "status", "Lost") for c in chosen])


@template("crm_delete_status_product", CRM_CATEGORY)
def delete_status_product(world: World, rng: Random) -> Draft | None:
    """Delete all of a rep's customers at a status and interested in a product (may be none)."""
    rep = pick(rng, world.reps)
    if rep is None:
        return None
    status, product = rng.choice(("Lost", "Qualified", "Lead")), rng.choice(PRODUCTS)
    chosen = [c for c in customers_of(world, rep) if c.status == status and c.product == product]
    prompt = (
        f"We no longer need to keep all of {rep_name(rep)}'s customers that are in the "
        f"{STATUS_WORDS[status]} stage and interested in {product.lower()}. Can you delete them "
        "from the crm?"
    )
    return Draft(prompt, [delete(c) for c in chosen])


@template("crm_status_by_rule", CRM_CATEGORY)
def status_by_rule(world: World, rng: Random) -> Draft | None:
    """Set the status of all of a rep's customers at one status and interested in a product."""
    rep = pick(rng, world.reps)
    if rep is None:
        return None
    status, product = rng.choice(("Lead", "Qualified", "Proposal")), rng.choice(PRODUCTS)
    target = rng.choice([s for s in STATUSES if s != status])
    chosen = [c for c in customers_of(world, rep) if c.status == status and c.product == product]
    noun = {
        "Lead": "leads",
        "Qualified": "qualified customers",
        "Proposal": "customers in proposal",
    }
    prompt = (
        f"Update all of {rep_name(rep)}'s {noun[status]} that are interested in "
        f"{product.lower()} to {STATUS_WORDS[target]} in the crm"
    )
    return Draft(prompt, [update(c, "status", target) for c in chosen])


@template("crm_question", CRM_CATEGORY)
def question(world: World, rng: Random) -> Draft | None:
    """A question answered by reading: a rep's pipeline."""
    rep = pick(rng, world.reps)
    if rep is None:
        return None
    status = rng.choice(STATUSES)
    prompt = rng.choice(
        (
            f"How many of {rep_name(rep)}'s customers are at the {STATUS_WORDS[status]} stage?",
            f"Which customers does {rep_name(rep)} need to follow up with this week?",
        )
    )
    return Draft(prompt, [])
