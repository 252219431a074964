"""The host's own command type: crediting a wallet twice credits twice, so it runs exactly once."""

from django.db.models import F

import messaging
from messaging import Invalid


def validate_credit(d: dict) -> int:
    amount = d.get("amount")
    if not isinstance(amount, int) or isinstance(amount, bool) or not 0 < amount <= 1000:
        raise Invalid("amount must be an integer from 1 to 1000")
    return amount


@messaging.command("wallet.credit", validate=validate_credit)
def credit(ctx, amount: int) -> dict:
    from .models import Wallet

    Wallet.objects.get_or_create(user=ctx.user)
    Wallet.objects.filter(user=ctx.user).update(balance=F("balance") + amount)
    return {"balance": Wallet.objects.get(user=ctx.user).balance}
